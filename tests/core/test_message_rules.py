"""The layout pieces of a render on their own: layout, system, window, fit (pairing: test_properties)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import Message, ToolCall
from flexamem_core.request.counting import PER_REQUEST, count_messages
from flexamem_core.request.cuts import TRUNCATION_MARK, fit_messages
from flexamem_core.request.layout import recent_window, split_layout
from flexamem_core.request.properties import no_inner_system, one_system

PROPS = settings(deadline=None, max_examples=200, suppress_health_check=list(HealthCheck))

S = Message(role="system", content="be brief")
T = Message(role="user", content="TASK: fix it")


def test_split_layout_agent():
    a = Message(role="assistant", content="ls")
    o = Message(role="user", content="out")
    lay = split_layout([S, T, a, o], "agent")
    assert lay.system is S and lay.task == (T,) and lay.body == (a, o) and lay.current == ()
    lay = split_layout([a, o], "agent")
    assert lay.system is None and lay.task == () and lay.body == (a, o)
    assert split_layout([], "agent").body == ()


def test_split_layout_reader_keeps_the_current_turn():
    msgs = [S, Message(role="user", content="q1"), Message(role="assistant", content="a1"),
            Message(role="user", content="q2")]
    lay = split_layout(msgs, "reader")
    assert lay.system is S and lay.task == () and lay.body == tuple(msgs[1:3]) and lay.current == (msgs[3],)
    only_assistant = [Message(role="assistant", content="x")]
    assert split_layout(only_assistant, "reader").current == ()


def test_split_layout_reader_with_its_task_fixed():
    q1, a1, q2 = (Message(role="user", content="q1"), Message(role="assistant", content="a1"),
                  Message(role="user", content="q2"))
    lay = split_layout([S, q1, a1, q2], "reader", task=True)
    assert lay.task == (q1,) and lay.body == (a1,) and lay.current == (q2,)
    assert lay.fixed == [S, q1]
    first = split_layout([S, q1], "reader", task=True)  # the only turn is the current one, not a task too
    assert first.task == () and first.current == (q1,)
    no_task = split_layout([S, T, Message(role="assistant", content="ls")], "agent", task=False)
    assert no_task.task == () and no_task.body[0] is T


def test_one_system_joins_leading_system_messages_as_a_copy():
    assert one_system([]) is None
    assert one_system([S]) is S
    s2 = Message(role="system", content="use tools")
    joined = one_system([S, s2])
    assert joined.role == "system" and joined.content == "be brief\n\nuse tools"
    assert S.content == "be brief"  # the originals are untouched
    lay = split_layout([S, s2, T], "agent")
    assert lay.system == joined and lay.task == (T,)


def test_no_inner_system_turns_later_system_messages_into_marked_user_copies():
    inner = Message(role="system", content="reminder: be careful", id="s9")
    out = no_inner_system([T, inner])
    assert out[0] is T
    assert out[1].role == "user" and out[1].content == "[system] reminder: be careful" and out[1].id == "s9"
    assert inner.role == "system"


@PROPS
@given(sizes=st.lists(st.integers(0, 500), max_size=30), limit=st.floats(0, 3000))
def test_recent_window_is_the_longest_newest_run_within_the_limit(sizes, limit):
    n = recent_window(sizes, limit)
    if not sizes:
        assert n == 0
        return
    assert 1 <= n <= len(sizes)
    if n > 1:
        assert sum(sizes[len(sizes) - n:]) <= limit
    if n < len(sizes):
        assert sum(sizes[len(sizes) - n - 1:]) > limit


def test_recent_window_always_holds_the_newest_unit():
    assert recent_window([10, 10, 5000], 100) == 1
    assert recent_window([10, 10, 50], 100) == 3


def test_fit_messages_cuts_the_largest_output_first_and_marks_it(tokenizer):
    call = Message(role="assistant", content="reading", tool_calls=(ToolCall("read", "{}", "c1"),))
    big = Message(role="tool", content="\n".join(f"row {i}: value {i * 7}" for i in range(2000)),
                  tool_call_id="c1", id="t1")
    small = Message(role="user", content="please summarise")
    msgs = [call, big, small]
    room = 600
    out, cuts = fit_messages(msgs, room, tokenizer)
    assert cuts >= 1
    assert count_messages(out, tokenizer) - PER_REQUEST <= room
    assert out[0] is call and out[2] is small  # only the big output was cut
    assert out[1].tool_call_id == "c1" and out[1].id == "t1" and out[1].metadata["flexamem_truncated"]
    assert "omitted by FlexA-Mem to fit the budget" in out[1].text
    assert out[1].text.startswith("row 0: value 0")
    assert out[1].text.endswith("row 1999: value 13993")
    assert big.text.count("\n") == 1999  # the caller's message is unchanged


def test_fit_messages_leaves_fitting_messages_alone(tokenizer):
    msgs = [T, Message(role="assistant", content="ok")]
    out, cuts = fit_messages(msgs, 1000, tokenizer)
    assert out == msgs and cuts == 0


def test_fit_messages_cuts_assistant_text_last(tokenizer):
    talk = Message(role="assistant", content="thinking " * 800)
    obs = Message(role="user", content="output " * 800)
    out, _ = fit_messages([talk, obs], 1000, tokenizer)
    assert out[0] is talk and out[1].metadata.get("flexamem_truncated")
    out, _ = fit_messages([talk, obs], 200, tokenizer)
    assert count_messages(out, tokenizer) - PER_REQUEST <= 200
    assert all(m.metadata.get("flexamem_truncated") for m in out)


def test_truncation_mark_says_how_much_was_left_out():
    assert "{n} tokens" in TRUNCATION_MARK
