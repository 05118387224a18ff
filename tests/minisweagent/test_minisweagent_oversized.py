"""A message larger than the budget through mini-swe-agent: cut with the mark, first or later.

The task (the first user message) and a command's output (the user message after the
first action) of 43k tokens each reach the model cut in the middle with the visible mark,
head and tail kept, within the budget; the agent's own history keeps them whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mswea_fakes as fakes
import pytest
from flexamem_minisweagent import FlexAMemModel, FlexAMemSettings
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment

from flexamem_core import FlexAMem
from flexamem_core.index.embeddings import HashingEmbedder
from tests.oversized import is_cut, long_text
from tests.wire_count import request_tokens

BUDGET = 4000


@pytest.mark.parametrize("position", ["task", "observation"])
def test_a_huge_message_is_cut_wherever_it_sits(tmp_path: Path, position: str) -> None:
    big = long_text()
    (tmp_path / "big.txt").write_text(big)
    inner = fakes.RecordingDeterministicModel(outputs=fakes.text_outputs(["cat big.txt", "echo small"]))
    # the hashing embedder: MiniLM would embed every piece of the 43k-token unit (about a minute on CPU)
    memory = FlexAMem(FlexAMemSettings().core_config(BUDGET), embedder=HashingEmbedder())
    model = FlexAMemModel(inner=inner, memory=memory, flexamem={"budget": BUDGET})
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path)), system_template="You are a shell agent.",
                         instance_template="{{task}}", step_limit=10, cost_limit=0)
    assert agent.run(big if position == "task" else fakes.TASK)["exit_status"] == "Submitted"
    texts = [str(m.get("content")) for m in agent.messages]
    assert any(big in t for t in texts)  # the history keeps it whole
    cut = 0
    for received in inner.received:
        sent: list[dict[str, Any]] = [{k: v for k, v in m.items() if k != "extra"} for m in received]
        assert request_tokens(sent) <= BUDGET
        assert not any(big in str(m.get("content")) for m in sent)
        cut += any(is_cut(str(m.get("content"))) for m in sent if m["role"] != "system")
    assert cut >= (len(inner.received) if position == "task" else 1)
