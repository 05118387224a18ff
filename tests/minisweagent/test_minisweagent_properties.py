"""Message rules of the adapter as properties over generated mini-swe-agent histories.

Tool-call steps (parallel calls too), text-action steps and format errors, mixed; every
render must keep one system message first and the task, pair every tool call with all its
results, keep the current turn, send the host's own dicts for what it shows unchanged, stay
within the budget, never touch the agent's list, and be deterministic.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from flexamem_minisweagent import FlexAMemModel, is_memory_dict, to_core
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from minisweagent.models.test_models import DeterministicToolcallModel
from mswea_checks import CUT_MARK, assert_pairing, assert_valid_structure, plain

from flexamem_core import FlexAMem, FlexAMemConfig

WORDS = ["ls", "-la", "src/app.py", "Traceback", "ValueError:", "line", "42", "def", "parse", "ok",
         "FAILED", "tests/test_app.py::test_parse", "import", "os", "über", "日本", "<returncode>1</returncode>",
         "`", "{", "}", "<|endoftext|>", "\t", "0x1f", "MAGIC_TOKEN=zebra"]


@st.composite
def output(draw: st.DrawFn, max_lines: int = 40) -> str:
    lines = draw(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=10).map(" ".join),
                          min_size=4, max_size=max_lines))
    rc = draw(st.sampled_from([0, 0, 1, 2]))
    return f"<returncode>{rc}</returncode>\n<output>\n" + "\n".join(lines) + "\n</output>"


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    task = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=30)))
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a shell agent.", "extra": {}},
                                  {"role": "user", "content": f"Task: {task}", "extra": {}}]
    for i in range(draw(st.integers(2, 14))):
        kind = draw(st.sampled_from(["tool", "tool", "text", "format_error"]))
        if kind == "tool":
            ids = [f"call_{i}_{k}" for k in range(draw(st.integers(1, 3)))]
            calls = [{"id": c, "type": "function",
                      "function": {"name": "bash", "arguments": json.dumps({"command": f"cmd {c}"})}} for c in ids]
            msgs.append({"role": "assistant", "content": "Thinking.", "tool_calls": calls,
                         "extra": {"actions": [{"command": f"cmd {c}", "tool_call_id": c} for c in ids]}})
            msgs += [{"role": "tool", "tool_call_id": c, "content": draw(output()), "extra": {}} for c in ids]
        elif kind == "text":
            msgs.append({"role": "assistant", "content": f"THOUGHT: go\n\n```mswea_bash_command\ncmd {i}\n```",
                         "extra": {"actions": [{"command": f"cmd {i}"}]}})
            msgs.append({"role": "user", "content": draw(output()), "extra": {}})
        else:
            msgs.append({"role": "user", "content": "Format error: no tool call found.",
                         "extra": {"interrupt_type": "FormatError"}})
    return msgs


def _model(budget: int, embedder: Any) -> FlexAMemModel:
    memory = FlexAMem(FlexAMemConfig(budget=budget), embedder=embedder)
    return FlexAMemModel(inner=DeterministicToolcallModel(outputs=[]), memory=memory,
                         flexamem={"budget": budget, "namespace": "prop"})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories(), budget=st.sampled_from([700, 1000, 1600, 5000]))
def test_render_keeps_the_message_rules(hashing_embedder: Any, history: list[dict[str, Any]],
                                        budget: int) -> None:
    before = copy.deepcopy(history)
    model = _model(budget, hashing_embedder)
    sent, info = model.render(history)
    assert history == before  # the agent's list and dicts are untouched
    event("memory" if any(is_memory_dict(m) for m in sent) else ("passthrough" if info["passthrough"] else "no memory"))

    assert_valid_structure(sent, history)
    assert sent[0] is history[0] and sent[1] is history[1]
    # every message shown unchanged is the host's own dict, in history order
    positions = {id(m): k for k, m in enumerate(history)}
    shown = [positions[id(m)] for m in sent if id(m) in positions]
    assert shown == sorted(shown)
    for m in sent:
        assert id(m) in positions or is_memory_dict(m) or CUT_MARK in str(m.get("content")), plain(m)
    # the budget counts what is sent, tool schema included
    count = model.memory.count_messages(to_core(sent).messages, extra_tokens=model.extra_tokens())
    assert count == info["tokens"] <= int(budget * 0.95)
    if info["passthrough"]:
        assert sent == history

    # deterministic: the same history renders the same, again and in a fresh memory
    again, _ = model.render(history)
    fresh, _ = _model(budget, hashing_embedder).render(history)
    assert [plain(m) for m in again] == [plain(m) for m in sent] == [plain(m) for m in fresh]


@settings(max_examples=25, deadline=None)
@given(history=histories())
def test_conversion_round_trips_every_message(history: list[dict[str, Any]]) -> None:
    converted = to_core(history)
    assert [m.id for m in converted.messages] == [str(k) for k in range(len(history))]
    assert [m.role for m in converted.messages] == [h["role"] for h in history]
    for message, original in zip(converted.messages, history):
        assert converted.originals[message.id] is original
        assert [c.id for c in message.tool_calls] == [c["id"] for c in original.get("tool_calls") or []]
    assert_pairing(history)
