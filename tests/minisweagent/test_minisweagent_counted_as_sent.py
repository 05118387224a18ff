"""Every request a mini-swe-agent run sends, counted independently as the provider gets it.

mini-swe-agent's message dicts are already chat-completions messages: its litellm model
classes drop ``extra`` and send the rest with ``tools=[BASH_TOOL]`` (tool-calling classes)
or no tools (text-based ones). That request is counted by :mod:`tests.wire_count`; the
library's count of it (``extra.flexamem.tokens``, the tool schema included) is never more
than 1% below it, and the request fits the budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mswea_fakes as fakes
import pytest
from flexamem_minisweagent import FlexAMemModel
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.utils.actions_toolcall import BASH_TOOL

from tests.wire_count import request_tokens, shortfall


def _sent(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What litellm's model class sends: each dict without its ``extra``."""
    return [{k: v for k, v in m.items() if k != "extra"} for m in received]


@pytest.mark.parametrize(("kind", "budget"), [("text", 2000), ("toolcall", 2000), ("toolcall", 3500)])
def test_no_request_is_counted_more_than_one_percent_low(tmp_path: Path, kind: str, budget: int) -> None:
    if kind == "text":
        inner: Any = fakes.RecordingDeterministicModel(outputs=fakes.text_outputs())
        tools: list[dict[str, Any]] = []
    else:
        inner = fakes.RecordingDeterministicToolcallModel(outputs=fakes.toolcall_outputs(parallel=2))
        tools = [BASH_TOOL]
    model = FlexAMemModel(inner=inner, flexamem={"budget": budget})
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path)), system_template="You are a shell agent. ü🙂",
                         instance_template="Task: {{task}}", step_limit=40, cost_limit=0)
    assert agent.run(fakes.TASK)["exit_status"] == "Submitted"
    infos = [m["extra"]["flexamem"] for m in agent.messages if "flexamem" in (m.get("extra") or {})]
    assert len(infos) == len(inner.received) > 4
    worst, best = -1.0, 1.0
    for info, received in zip(infos, inner.received, strict=True):
        independent = request_tokens(_sent(received), tools)
        low = shortfall(info["tokens"], independent)
        worst, best = max(worst, low), min(best, low)
        assert independent <= budget, f"sent {independent} tokens at budget {budget}"
    print(f"mini-swe-agent {kind} budget {budget}: {len(infos)} requests, "
          f"low by {100 * best:+.2f}% to {100 * worst:+.2f}%")
    assert worst <= 0.01, f"counted {100 * worst:.2f}% low"
    assert any(not info["passthrough"] for info in infos), "the run must outgrow the budget"
