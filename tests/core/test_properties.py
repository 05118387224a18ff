"""Each message rule on its own (one test group per property class), then all of them together."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import Message, ToolCall
from flexamem_core.request.properties import (
    NO_RESULT,
    ORPHAN_MARK,
    PROPERTIES,
    Context,
    EveryCallAnswered,
    NewestStepUnchanged,
    NoOrphanResults,
    OneSystemFirst,
    ResultsFollowCalls,
    SendableText,
    UniqueCallIds,
    apply_properties,
    problems,
)

from .checks import structure_problem

PROPS = settings(deadline=None, max_examples=300, suppress_health_check=list(HealthCheck))


def call(*ids, content="act"):
    return Message(role="assistant", content=content,
                   tool_calls=tuple(ToolCall("read_file", f'{{"n": {k}}}', i) for k, i in enumerate(ids)))


def result(text, call_id=None):
    return Message(role="tool", content=text, tool_call_id=call_id)


USER = Message(role="user", content="hi")


def test_every_rule_is_listed_once_with_a_name_and_a_rule():
    names = [p.name for p in PROPERTIES]
    assert len(set(names)) == len(names) == 7
    assert all(p.rule for p in PROPERTIES)


# ------------------------------------------------------------------ sendable text

def test_sendable_text_cleans_every_string_sent():
    prop = SendableText()
    dirty = [Message(role="user", content="a\x00b\x1b[31m\ud800"),
             Message(role="user", content=({"type": "text", "text": "x\x07"}, {"type": "image_url", "image_url": {}})),
             Message(role="assistant", tool_calls=(ToolCall("f\x00", "{\"a\": \"\x01\"}", "i\x02"),))]
    assert prop.problem(dirty) is not None
    out, fixes = prop.enforce(dirty)
    assert fixes == 3 and prop.problem(out) is None
    assert out[0].content == "ab[31m?" and out[0].metadata["flexamem_sanitised"]
    assert out[1].content[0]["text"] == "x" and out[1].content[1] == {"type": "image_url", "image_url": {}}
    assert out[2].tool_calls[0] == ToolCall("f", "{\"a\": \"\"}", "i")
    for m in out:  # what is sent is valid UTF-8 JSON
        m.to_dict()["content"] and str(m.to_dict()).encode("utf-8")
    assert dirty[0].content == "a\x00b\x1b[31m\ud800"


def test_clean_messages_are_sent_as_the_same_objects():
    msgs = [USER, call("a"), result("r", "a")]
    out, fixes = SendableText().enforce(msgs)
    assert fixes == 0 and all(a is b for a, b in zip(out, msgs))


# ------------------------------------------------------------------ one system message first

def test_one_system_first_joins_leading_ones_and_marks_later_ones():
    prop = OneSystemFirst()
    s1, s2 = Message(role="system", content="be brief"), Message(role="system", content="use tools")
    inner = Message(role="system", content="reminder")
    msgs = [s1, s2, USER, inner]
    assert prop.problem(msgs) == "system messages at [0, 1, 3]"
    out, fixes = prop.enforce(msgs)
    assert prop.problem(out) is None and fixes == 2
    assert out[0].content == "be brief\n\nuse tools" and out[1] is USER
    assert out[2].role == "user" and out[2].content == "[system] reminder"
    assert prop.enforce([s1, USER]) == ([s1, USER], 0)


# ------------------------------------------------------------------ unique call ids

def test_unique_call_ids_gives_missing_and_repeated_ids_and_moves_their_results():
    prop = UniqueCallIds()
    msgs = [call(None, "a", "a"), result("r1", "a"), result("r2", "a"), call("a"), result("r3", "a")]
    assert prop.problem(msgs) is not None
    out, fixes = prop.enforce(msgs)
    assert prop.problem(out) is None and fixes == 3
    first, second = out[0].tool_calls[1].id, out[0].tool_calls[2].id
    assert first == "a" and second != "a"
    assert [out[1].tool_call_id, out[2].tool_call_id] == [first, second]
    assert out[4].tool_call_id == out[3].tool_calls[0].id != "a"  # the later step's own call


# ------------------------------------------------------------------ every call answered

def test_an_id_less_result_answers_its_own_id_less_call_not_the_first_open_one():
    """Finding 4: read_file(a.py) must not be shown returning b.py's content."""
    a_call = ToolCall("read_file", '{"path": "a.py"}', "c1")
    b_call = ToolCall("read_file", '{"path": "b.py"}', None)
    msgs = [Message(role="assistant", tool_calls=(a_call, b_call)),
            result("contents of b.py"), result("contents of a.py", "c1")]
    out = apply_properties(msgs).messages
    assert structure_problem(out) is None
    by_id = {m.tool_call_id: m.text for m in out if m.role == "tool"}
    assert by_id["c1"] == "contents of a.py"
    assert by_id[out[0].tool_calls[1].id] == "contents of b.py"
    assert not any(m.metadata.get("flexamem") == "orphan-result" for m in out)


def test_id_less_results_go_by_position_to_the_calls_of_their_own_step():
    prop = EveryCallAnswered()
    msgs, _ = UniqueCallIds().enforce([call(None, None), result("first"), result("second"), USER,
                                       call("x"), result("third")])
    out, fixes = prop.enforce(msgs)
    assert prop.problem(out) is None and fixes == 3
    ids = [c.id for c in out[0].tool_calls]
    assert [out[1].tool_call_id, out[2].tool_call_id] == ids
    assert out[5].tool_call_id == "x" and out[5].text == "third"


def test_a_call_without_a_result_gets_a_marked_placeholder_after_its_results():
    prop = EveryCallAnswered()
    msgs = [call("a", "b"), result("ra", "a"), USER]
    assert prop.problem(msgs) is not None
    out, fixes = prop.enforce(msgs)
    assert fixes == 1 and prop.problem(out) is None
    assert [(m.role, m.tool_call_id, m.text) for m in out[1:]] == [
        ("tool", "a", "ra"), ("tool", "b", NO_RESULT), ("user", None, "hi")]


# ------------------------------------------------------------------ results follow calls

def test_a_message_between_a_call_and_its_result_is_moved_after_the_results():
    """Finding 4: a user message between a call and its result used to orphan the result."""
    between = Message(role="user", content="(the user typed while the tool ran)")
    msgs = [call("a"), between, result("ra", "a")]
    prop = ResultsFollowCalls()
    assert prop.problem(msgs) is not None
    out, fixes = prop.enforce(msgs)
    assert fixes == 1 and prop.problem(out) is None
    assert [m.text for m in out] == ["act", "ra", between.text]
    full = apply_properties([call("a"), Message(role="system", content="note"), result("ra", "a")]).messages
    assert structure_problem(full) is None
    assert [m.text for m in full] == ["act", "ra", "[system] note"]
    assert NO_RESULT not in [m.text for m in full]


# ------------------------------------------------------------------ no orphan results

def test_orphan_and_duplicate_results_become_marked_user_messages():
    prop = NoOrphanResults()
    msgs = [result("before any call", "z"), call("a"), result("ra", "a"), result("again", "a"), result("ghost", "q")]
    assert prop.problem(msgs) == "orphan tool results at [0, 3, 4]"
    out, fixes = prop.enforce(msgs)
    assert fixes == 3 and prop.problem(out) is None
    assert [m.text for m in out if m.role == "user"] == [
        f"{ORPHAN_MARK} before any call", f"{ORPHAN_MARK} again", f"{ORPHAN_MARK} ghost"]


# ------------------------------------------------------------------ newest step unchanged

def test_newest_step_check_needs_the_report_to_explain_a_change():
    prop = NewestStepUnchanged()
    source = [USER, call("a"), result("ra", "a")]
    assert prop.problem(list(source), Context(source, {})) is None
    changed = [USER, call("a"), result("something else", "a")]
    assert "repaired" in prop.problem(changed, Context(source, {"newest_step": "unchanged"}))
    assert prop.problem(changed, Context(source, {"newest_step": "repaired", "pairing_repairs": 1})) is None
    cut = [USER, call("a"), Message(role="tool", content="r[...]", tool_call_id="a",
                                    metadata={"flexamem_truncated": True})]
    assert prop.problem(cut, Context(source, {"newest_step": "cut"})) is not None  # no cut counted
    assert prop.problem(cut, Context(source, {"newest_step": "cut", "newest_unit_cut_messages": 1})) is None
    assert prop.enforce(source) == (source, 0)


# ------------------------------------------------------------------ all rules together

ids = st.sampled_from([None, "a", "b", "c"])
texts = st.sampled_from(["hi", "obs", "", "nul\x00", "lone \ud800", "<|endoftext|>"])
messy_message = st.one_of(
    st.builds(lambda t: Message(role="user", content=t), texts),
    st.builds(lambda calls, t: Message(role="assistant", content=t,
                                       tool_calls=tuple(ToolCall("f", "{}", i) for i in calls)),
              st.lists(ids, max_size=3), texts),
    st.builds(lambda i, t: Message(role="tool", content=t or "result", tool_call_id=i), ids, texts),
    st.builds(lambda t: Message(role="system", content=t or "sys"), texts),
)


@PROPS
@given(messages=st.lists(messy_message, max_size=15))
def test_applying_the_rules_makes_every_rule_hold_and_loses_no_text(messages):
    before = list(messages)
    done = apply_properties(messages)
    out = done.messages
    assert problems(out) == {}
    assert structure_problem(out) is None
    assert messages == before
    again = apply_properties(out)
    assert again.messages == out and sum(again.fixes.values()) == 0, "enforcing twice changes nothing"
    sent = "\n".join(m.text for m in out)
    for m in messages:
        assert not m.text.strip() or m.text.replace("\ud800", "?").replace("\x00", "") in sent
    if problems(messages) == {}:
        assert all(a is b for a, b in zip(out, messages)) and len(out) == len(messages)


@pytest.mark.parametrize("prop", PROPERTIES[:-1], ids=lambda p: p.name)
def test_each_rule_alone_is_idempotent_on_its_own_output(prop):
    msgs = [Message(role="system", content="s"), call("k", "a", "a"), USER, result("r\x00"), result("x", "a"),
            Message(role="system", content="inner"), result("stray", "zz")]
    out, fixes = prop.enforce(msgs)
    assert fixes > 0
    assert prop.enforce(out)[1] == 0
