"""mini-swe-agent with ``FlexAMemModel`` keeps the task and stays within the budget under odd inputs.

The task is the run's first user message (the instance template with the task). Each test
runs mini-swe-agent's ``DefaultAgent`` with its own deterministic models (tool-calling and
text-based) and its ``LocalEnvironment`` running real shell commands whose outputs outgrow
the budget, and then meets one odd input:

- an empty question, a 50,000-character question: a user message added in the middle of
  the run. mini-swe-agent has one task per run and no chat turns; a human's words reach the
  model as the user message of an ``InterruptAgentFlow`` (what ``InteractiveAgent`` raises
  from ``step`` when the user interrupts and comments, rejects a command or adds a task).
  The agent here raises it from ``step`` after the verbose commands, as ``InteractiveAgent``
  does, without a terminal;
- a 300-token budget (with a plain question);
- an image: mini-swe-agent's message format has one, through its ``multimodal_regex``: a
  command whose output carries ``<MSWEA_MULTIMODAL_CONTENT>`` tags becomes an observation
  whose content is a list with an OpenAI ``image_url`` part (here a 1x1 PNG as a data URL),
  then the plain question;
- an orphan tool result: a ``tool`` message whose call is not in the history, added by an
  ``InterruptAgentFlow`` with the question after it.

The model then runs one more command and submits. Every request the inner model receives
must hold the task (whole, or cut with the visible mark when the budget cannot hold it),
keep the message rules (one system message, first; every tool call answered, no orphan
result) and stay within 0.95 x budget as the adapter counts what is sent (the bash tool
schema of the tool-calling class included; also counted independently as chat-completions
JSON, within the budget). The agent's messages are never changed by a query and keep the
complete history.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import mswea_fakes as fakes
import pytest
from flexamem_minisweagent import FlexAMemModel, FlexAMemSettings, is_memory_dict, to_core
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.exceptions import InterruptAgentFlow, UserInterruption
from minisweagent.models.utils.actions_toolcall import BASH_TOOL
from minisweagent.models.utils.openai_multimodal import DEFAULT_MULTIMODAL_REGEX
from mswea_checks import assert_pairing, plain, role_of

from flexamem_core import FlexAMem
from flexamem_core.index.embeddings import HashingEmbedder
from tests.odd_inputs import ODD, PNG_URL, budget_for, is_task, question_for
from tests.wire_count import request_tokens

BUDGET = 2000
KINDS = ["toolcall", "text"]
QUESTION = "Which value does settings.env hold?"
#: A command whose output is an image, in mini-swe-agent's multimodal tags.
IMAGE_COMMAND = (f"printf '<MSWEA_MULTIMODAL_CONTENT><CONTENT_TYPE>image_url</CONTENT_TYPE>{PNG_URL}"
                 "</MSWEA_MULTIMODAL_CONTENT>'")
SYSTEM = "You are a shell agent."
INSTANCE = "Task: {{task}}"


def _budget(odd: str) -> int:
    return budget_for(odd, BUDGET)


def _question(odd: str) -> str:
    return question_for(odd, QUESTION)


def _odd_messages(odd: str) -> list[dict[str, Any]]:
    """What the interruption adds to the agent's messages (the question last)."""
    question = {"role": "user", "content": _question(odd), "extra": {"interrupt_type": "UserInterruption"}}
    if odd == "an orphan tool result":
        return [{"role": "tool", "tool_call_id": "call-from-nowhere", "content": "shelf count: 48", "extra": {}},
                question]
    return [question]


def _reply(kind: str, commands: list[str], n: int) -> dict[str, Any]:
    """One scripted reply of the model: ``commands`` as tool calls (or one bash block)."""
    if kind == "text":
        [command] = commands
        return {"role": "assistant", "content": f"THOUGHT: step {n}.\n\n```mswea_bash_command\n{command}\n```",
                "extra": {"actions": [{"command": command}], "cost": 0.0, "timestamp": time.time()}}
    calls = [{"id": f"call_{n}_{j}", "type": "function",
              "function": {"name": "bash", "arguments": json.dumps({"command": c})}} for j, c in enumerate(commands)]
    return {"role": "assistant", "content": f"Running {len(commands)} command(s).", "tool_calls": calls,
            "extra": {"actions": [{"command": c, "tool_call_id": f"call_{n}_{j}"} for j, c in enumerate(commands)],
                      "cost": 0.0, "timestamp": time.time()}}


def _outputs(kind: str, odd: str) -> tuple[list[dict[str, Any]], int]:
    """The script: the verbose commands (two per reply for the tool-calling class), then, after the
    odd input, one more command and the submission; and how many replies come before the odd input."""
    per = 2 if kind == "toolcall" else 1
    commands = fakes.VERBOSE_COMMANDS
    outputs = [_reply(kind, commands[i:i + per], i) for i in range(0, len(commands), per)]
    if odd == "an image":
        outputs.append(_reply(kind, [IMAGE_COMMAND], 90))
    before = len(outputs)
    outputs.append(_reply(kind, ["cat settings.env"], 91))
    outputs.append(_reply(kind, [f"{fakes.SUBMIT} && echo {fakes.SECRET}"], 92))
    return outputs, before


class InterruptedAgent(DefaultAgent):
    """mini-swe-agent's default agent, interrupted once by a human, as ``InteractiveAgent`` is: after
    ``interrupt_after`` model calls, ``step`` raises the interruption carrying ``odd_messages``. It
    also checks that no query changes its messages."""

    def __init__(self, *args: Any, interrupt_after: int, odd_messages: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.interrupt_after = interrupt_after
        self.odd_messages: list[dict[str, Any]] | None = odd_messages

    def step(self) -> list[dict]:
        if self.n_calls == self.interrupt_after and self.odd_messages is not None:
            odd, self.odd_messages = self.odd_messages, None
            raise InterruptAgentFlow(*odd) if len(odd) > 1 else UserInterruption(*odd)
        return super().step()

    def query(self) -> dict:
        before = copy.deepcopy(self.messages)
        try:
            return super().query()
        finally:
            assert self.messages[:len(before)] == before, "the model changed the agent's messages"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _holds_task(request: list[dict[str, Any]], task: str) -> bool:
    return any(role_of(m) == "user" and is_task(_text(m), task) for m in request)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("odd", ODD)
def test_every_query_keeps_the_task_within_the_budget(tmp_path: Path, odd: str, kind: str) -> None:
    budget = _budget(odd)
    odd_messages = _odd_messages(odd)
    given = copy.deepcopy(odd_messages)
    outputs, interrupt_at = _outputs(kind, odd)
    inner_class = fakes.RecordingDeterministicToolcallModel if kind == "toolcall" else fakes.RecordingDeterministicModel
    multimodal = {"multimodal_regex": DEFAULT_MULTIMODAL_REGEX} if odd == "an image" else {}
    inner = inner_class(outputs=outputs, **multimodal)
    # the adapter's own config for this budget; the hashing embedder keeps the test fast
    memory = FlexAMem(FlexAMemSettings().core_config(budget), embedder=HashingEmbedder())
    model = FlexAMemModel(inner=inner, memory=memory, flexamem={"budget": budget})
    agent = InterruptedAgent(model, LocalEnvironment(cwd=str(tmp_path)), system_template=SYSTEM,
                             instance_template=INSTANCE, step_limit=40, cost_limit=0,
                             interrupt_after=interrupt_at, odd_messages=odd_messages)
    assert agent.run(fakes.TASK)["exit_status"] == "Submitted"
    messages = agent.messages
    task = _text(messages[1])
    assert task == f"Task: {fakes.TASK}"

    # Every request the inner model received.
    assert len(inner.received) == len(outputs)
    tools = [BASH_TOOL] if kind == "toolcall" else []
    for k, request in enumerate(inner.received):
        roles = [role_of(m) for m in request]
        assert roles[0] == "system" and roles.count("system") == 1, (k, roles)
        assert_pairing(request)
        assert _holds_task(request, task), (k, [(role_of(m), _text(m)[:40]) for m in request])
        # as the adapter counts what is sent: the messages and the tool schema of the model class
        assert memory.count_messages(to_core(request).messages, extra_tokens=model.extra_tokens()) \
            <= int(0.95 * budget), k
        assert request_tokens([plain(m) for m in request], tools) <= budget, k
    infos = [m["extra"]["flexamem"] for m in messages if "flexamem" in (m.get("extra") or {})]
    assert len(infos) == len(outputs)
    assert any(not info["passthrough"] for info in infos[:interrupt_at]), "the run must outgrow the budget"
    assert not infos[-1]["passthrough"]

    # The odd input reached the model: the question is the newest message of the next request.
    question = _question(odd)
    newest = inner.received[interrupt_at][-1]
    assert role_of(newest) == "user"
    assert is_task(_text(newest), question)  # whole, or cut with the mark

    # The agent's messages keep the complete history; the odd messages were not changed.
    assert odd_messages == given
    assert not any(is_memory_dict(m) for m in messages)
    assert [plain(m) for m in messages if m in odd_messages] == [plain(m) for m in given]
    replies = [m for m in messages if m.get("role") == "assistant"]
    assert [plain(m) for m in replies] == [plain(m) for m in outputs]  # every reply, and each action's output:
    observations = [m for m in messages[2:] if "returncode" in (m.get("extra") or {})]
    assert len(observations) == sum(len(m["extra"]["actions"]) for m in outputs) - 1  # the submission exits
    texts = "\n".join(_text(m) for m in messages)
    for line in ("inventory line 80", "log entry 59: checking module_59", "MAGIC_TOKEN=zebra-4521", "checksum 260"):
        assert line in texts
    if odd == "an image":
        images = [p for m in messages if isinstance(m.get("content"), list) for p in m["content"]
                  if p.get("type") == "image_url"]
        assert images == [{"type": "image_url", "image_url": {"url": PNG_URL}}]
    assert messages[-1]["role"] == "exit"
