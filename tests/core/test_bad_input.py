"""Bad input gets a clear error or a documented graceful result, and nothing is lost."""

from __future__ import annotations

import copy
import json

import pytest
from pydantic import ValidationError

from flexamem_core import BudgetError, FlexAMem, FlexAMemConfig, Message, MessageError
from flexamem_core.request.counting import count_messages
from flexamem_core.stores.names import NamespaceError

from .checks import steps, structure_problem

TRUNCATED = "omitted by FlexA-Mem to fit the budget"


def stored_messages(m: FlexAMem) -> list[Message]:
    return [msg for n in m.store.notes("default") for msg in m.store.get_unit("default", n.unit_key).messages]


def test_empty_history_passes_through(mem):
    r = mem(budget=1000).render([])
    assert r.passthrough and r.messages == [] and r.memory_text is None and r.tokens == 0
    assert mem().ingest([]) == 0


def test_all_system_history(mem, tokenizer):
    history = [{"role": "system", "content": "rule one"}, {"role": "system", "content": "rule two"}]
    r = mem(budget=1000).render(history)
    # One system message first, in passthrough too: the leading ones are joined.
    assert r.passthrough and [m.text for m in r.messages] == ["rule one\n\nrule two"]
    assert r.tokens == count_messages(r.messages, tokenizer)
    # Over the budget it is all fixed prompt: nothing can be left out, so BudgetError (documented).
    big = [{"role": "system", "content": "rule " * 400}, {"role": "system", "content": "more " * 400}]
    with pytest.raises(BudgetError, match="too small for the fixed prompt"):
        mem(budget=500).render(big)


def test_one_message_far_larger_than_the_budget(mem, tokenizer):
    output = "\n".join(f"row {i}: " + "value " * 10 for i in range(5000))  # ~65k tokens
    history = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "TASK: sum rows"},
               *steps(6),
               {"role": "assistant", "content": "", "id": "big_call",
                "tool_calls": [{"id": "c1", "name": "read_table", "arguments": json.dumps({"table": "t"})}]},
               {"role": "tool", "content": output, "tool_call_id": "c1", "id": "big_result"}]
    before = copy.deepcopy(history)
    m = mem(budget=3000)
    r = m.render(history)
    assert history == before
    assert r.tokens == count_messages(r.messages, tokenizer) <= int(3000 * 0.95)
    assert structure_problem(r.messages) is None
    cut = [x for x in r.messages if x.metadata.get("flexamem_truncated")]
    assert [x.tool_call_id for x in cut] == ["c1"] and TRUNCATED in cut[0].text
    assert cut[0].text.startswith("row 0:") and cut[0].text.rstrip().endswith("value")
    assert r.report["newest_unit_cut_messages"] >= 1
    # Once the step is old, the store holds the output verbatim.
    m.render([*history, *steps(1, start=50)])
    stored = {x.id: x for x in stored_messages(m)}
    assert stored["big_result"].content == output


def test_non_text_parts_are_stored_verbatim_and_shown_as_placeholders(mem):
    parts = [{"type": "text", "text": "here is the screenshot"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * 2000}},
             {"type": "input_audio", "input_audio": {"data": "AAAA" * 500, "format": "wav"}}]
    history = [{"role": "user", "content": "TASK: describe"},
               {"role": "assistant", "content": "```bash\nscreenshot\n```", "id": "a0"},
               {"role": "user", "content": parts, "id": "img"}, *steps(12, start=1)]
    m = mem(budget=1000)
    r = m.render(history)
    assert r.memory_text is not None
    stored = {x.id: x for x in stored_messages(m)}
    assert [dict(p) for p in stored["img"].content] == parts
    unit = next(m.store.get_unit("default", n.unit_key) for n in m.store.notes("default")
                if any(x.id == "img" for x in m.store.get_unit("default", n.unit_key).messages))
    assert "[image]" in unit.raw and "[audio]" in unit.raw and "QUJD" not in unit.raw
    pieces = m.store.pieces("default", unit.key)
    assert any("[image]" in p.text for p in pieces) and not any("QUJD" in p.text for p in pieces)
    assert "QUJD" not in r.memory_text


def test_malformed_tool_calls_are_repaired_in_the_copy_only(mem):
    malformed = [
        {"role": "assistant", "content": "", "id": "m1",
         "tool_calls": [{"name": "search", "arguments": "{\"q\": \"x\"}"}]},  # no id
        {"role": "tool", "content": "found x", "id": "m2"},  # no tool_call_id
        {"role": "tool", "content": "stray result", "tool_call_id": "ghost", "id": "m3"},  # no call
    ]
    history = [{"role": "user", "content": "TASK: find x"}, *steps(10), *malformed]
    m = mem(budget=1200)
    r = m.render(history)
    assert not r.passthrough and structure_problem(r.messages) is None
    assert r.report["pairing_repairs"] >= 2
    texts = "\n".join(x.text for x in r.messages)
    assert "found x" in texts and "[tool result without a matching call] stray result" in texts
    # Later, the malformed step is stored exactly as it was given.
    m.render([*history, *steps(3, start=20)])
    stored = {x.id: x for x in stored_messages(m)}
    assert stored["m1"].tool_calls[0].id is None
    assert stored["m2"].tool_call_id is None and stored["m3"].tool_call_id == "ghost"


def test_lone_surrogates_and_control_characters(mem, tokenizer):
    nasty = "bad \ud800 surrogate \x00 nul \x07 bell \x1b[31m ansi end"
    history = [{"role": "user", "content": "TASK: read logs"},
               {"role": "assistant", "content": "```bash\ncat log\n```", "id": "a"},
               {"role": "user", "content": nasty * 40, "id": "nasty"}, *steps(10, start=1)]
    m = mem(budget=1200)
    r = m.render(history)
    assert r.tokens <= int(1200 * 0.95) and r.memory_text is not None
    assert "\x00" not in r.memory_text and "\ud800" not in r.memory_text
    r.memory_text.encode("utf-8")  # always valid UTF-8
    stored = {x.id: x for x in stored_messages(m)}
    assert stored["nasty"].content == nasty * 40  # verbatim, surrogate included
    assert tokenizer.count(nasty) > 0


def test_a_million_space_tool_output(mem, tokenizer):
    history = [{"role": "user", "content": "TASK: inspect"},
               {"role": "assistant", "content": "", "id": "c",
                "tool_calls": [{"id": "t1", "name": "cat", "arguments": "{}"}]},
               {"role": "tool", "content": " " * 1_000_000 + "END", "tool_call_id": "t1", "id": "spaces"},
               *steps(4, start=1)]
    m = mem(budget=4000)
    r = m.render(history)
    assert r.tokens == count_messages(r.messages, tokenizer) <= 3800
    assert structure_problem(r.messages) is None
    stored = {x.id: x for x in stored_messages(m)}
    assert stored["spaces"].content == " " * 1_000_000 + "END"
    # The newest step may be the huge one as well.
    r = m.render(history[:3])
    assert r.tokens <= 3800 and structure_problem(r.messages) is None


@pytest.mark.parametrize(("settings", "field"), [
    ({"budget": -5}, "budget"),
    ({"budget": 0}, "budget"),
    ({"tuning": {"piece_tokens": -1}}, "piece_tokens"),
    ({"tuning": {"seeds": -1}}, "seeds"),
    ({"tuning": {"link_discount": 1.5}}, "link_discount"),
    ({"mode": "pieces"}, "mode"),
    ({"history": "chat"}, "history"),
    ({"tuning": {"merged_record_words": 200, "merged_record_cut_words": 150}}, "merged_record_cut_words"),
    ({"not_a_setting": 1}, "not_a_setting"),
])
def test_invalid_settings_are_rejected_clearly(settings, field):
    with pytest.raises(ValidationError, match=field):
        FlexAMemConfig(**settings)
    with pytest.raises(ValueError):  # ValidationError is a ValueError
        FlexAMem(**settings)


def test_budget_too_small_for_the_fixed_prompt(mem):
    # The task is cut with the mark like any oversized message; only the system prompt is never cut.
    history = [{"role": "system", "content": "policy " * 300}, {"role": "user", "content": "TASK " * 300},
               *steps(3)]
    r = mem(budget=400).render(history)
    assert r.tokens <= 380 and TRUNCATED in r.messages[1].text and r.report["task_cut_messages"] == 1
    history[0]["content"] = "policy " * 400
    with pytest.raises(BudgetError, match=r"budget 400 \(usable 380\) is too small for the fixed prompt"):
        mem(budget=400).render(history)
    with pytest.raises(BudgetError):
        mem(budget=5000).render(history, budget=400)


def test_bad_call_arguments(mem):
    m = mem(budget=1000)
    with pytest.raises(ValueError, match="extra_tokens"):
        m.render([{"role": "user", "content": "hi"}], extra_tokens=-1)
    with pytest.raises(MessageError, match="unknown role"):
        m.render([{"role": "robot", "content": "hi"}])
    with pytest.raises(MessageError, match="not a string"):
        m.render("hello")
    with pytest.raises(MessageError, match="message 1"):
        m.render([{"role": "user", "content": "hi"}, 42])
    with pytest.raises(NamespaceError):
        m.render([{"role": "user", "content": "hi"}], namespace="../etc")
