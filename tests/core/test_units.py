"""History to units: agent steps packed to a size, reader spans cut at turns and sessions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import FlexAMem, FlexAMemConfig, Message, Tuning
from flexamem_core.request.layout import split_layout
from flexamem_core.write.units import pack_units, split_steps, to_unit, unit_key

from .strategies import agent_history, conversation

PROPS = settings(deadline=None, max_examples=80, suppress_health_check=list(HealthCheck))


def agent_body(history: list[dict]) -> list[Message]:
    return list(split_layout([Message.from_dict(m) for m in history], "agent").body)


def step_tokens(step, tokenizer, first_step: int = 1) -> int:
    return pack_units(step, "agent", tokenizer, 10**9, first_step=first_step, final=True)[0].tokens


@PROPS
@given(history=agent_history(min_steps=1, max_steps=25), size=st.integers(20, 1500),
       final=st.booleans())
def test_agent_units_never_split_a_step(history, size, final, tokenizer):
    body = agent_body(history)
    units = pack_units(body, "agent", tokenizer, size, final=final)
    assert [m for u in units for m in u.messages] == body
    for i, u in enumerate(units):
        # A unit starts a step: an assistant message (only the very first may start with
        # a human message that came before any step).
        assert u.messages[0].role == "assistant" or i == 0
        # Every tool result sits in the same unit as the call it answers.
        call_ids = {c.id for m in u.messages for c in m.tool_calls}
        assert all(m.tool_call_id in call_ids for m in u.messages if m.role == "tool")


@PROPS
@given(history=agent_history(min_steps=2, max_steps=25), size=st.integers(20, 1500))
def test_agent_units_reach_the_size_before_closing(history, size, tokenizer):
    body = agent_body(history)
    units = pack_units(body, "agent", tokenizer, size, final=False)
    assert units, "a non-empty body makes at least one unit"
    assert not units[-1].closed, "the newest unit stays open: its next step has not begun"
    for u in units[:-1]:
        assert u.closed
        assert u.tokens >= size
        steps = split_steps(u.messages)
        without_last = sum(b for b in (step_tokens(s, tokenizer) for s in steps[:-1]))
        assert without_last < size, "a unit closes as soon as it reached the size"
    for u in units:
        assert u.tokens == sum(tokenizer.count(b.text) for b in u.blocks)


def test_a_unit_closes_only_once_the_next_step_began(tokenizer):
    big = "output line\n" * 400
    body = [
        Message(role="assistant", content="```bash\ncat big.txt\n```", id="a1"),
        Message(role="user", content=big, id="o1"),
    ]
    units = pack_units(body, "agent", tokenizer, 100)
    assert len(units) == 1 and not units[0].closed and units[0].tokens > 100
    # Another observation for the same step joins it; the unit still waits.
    body.append(Message(role="user", content="more output", id="o1b"))
    units = pack_units(body, "agent", tokenizer, 100)
    assert len(units) == 1 and not units[0].closed
    body.append(Message(role="assistant", content="```bash\nls\n```", id="a2"))
    units = pack_units(body, "agent", tokenizer, 100)
    assert [u.closed for u in units] == [True, False]
    assert [m.id for m in units[0].messages] == ["a1", "o1", "o1b"]
    assert units[1].first_step == 2


def test_text_action_observations_stay_with_their_command(tokenizer):
    body = []
    for i in range(6):
        body += [Message(role="assistant", content=f"THOUGHT: look\n```bash\ngrep -n foo f{i}.py\n```"),
                 Message(role="user", content=f"<returncode>0</returncode>\n<output>\n{'x ' * 300}\n</output>")]
    units = pack_units(body, "agent", tokenizer, 250)
    for u in units:
        roles = [m.role for m in u.messages]
        assert roles == ["assistant", "user"] * (len(roles) // 2)
    assert [u.first_step for u in units] == list(range(1, 7))
    assert units[0].blocks[0].label == "step 1: grep -n foo f0.py"


@PROPS
@given(history=conversation(min_turns=2, max_turns=60), size=st.integers(30, 2000))
def test_reader_spans_cut_at_user_turns_and_sessions(history, size, tokenizer):
    msgs = [Message.from_dict(m) for m in history]
    units = pack_units(msgs, "reader", tokenizer, size, final=True)
    assert [m for u in units for m in u.messages] == msgs
    for prev, u in zip(units, units[1:]):
        sessions = {m.metadata["session"] for m in u.messages}
        assert len(sessions) == 1, "a span never crosses a session"
        assert u.session == u.messages[0].metadata["session"]
        if prev.session == u.session:
            # Same session: cut only at a user turn and only because the span would be too long.
            assert u.messages[0].role == "user"
            first = pack_units(u.messages[:1], "reader", tokenizer, size, final=True)[0].tokens
            assert prev.tokens + first > size
    assert all(u.closed for u in units)
    assert not pack_units(msgs, "reader", tokenizer, size, final=False)[-1].closed


def test_session_change_cuts_even_a_tiny_span(tokenizer):
    msgs = [Message(role="user", content="hi", metadata={"session": "1"}),
            Message(role="assistant", content="hello", metadata={"session": "1"}),
            Message(role="user", content="again", metadata={"session": "2"})]
    units = pack_units(msgs, "reader", tokenizer, 10_000, final=True)
    assert [len(u.messages) for u in units] == [2, 1]
    assert [u.session for u in units] == ["1", "2"]


@PROPS
@given(history=agent_history(min_steps=2, max_steps=20), size=st.integers(20, 800), cut=st.floats(0, 1))
def test_packing_is_deterministic_in_the_prefix(history, size, cut, tokenizer):
    body = agent_body(history)
    prefix = body[: int(len(body) * cut)]
    full = pack_units(body, "agent", tokenizer, size)
    part = pack_units(prefix, "agent", tokenizer, size)
    closed = [u for u in part if u.closed]
    assert full[: len(closed)] == closed


@PROPS
@given(history=conversation(min_turns=2, max_turns=40), size=st.integers(30, 1000), cut=st.floats(0, 1))
def test_reader_packing_is_deterministic_in_the_prefix(history, size, cut, tokenizer):
    msgs = [Message.from_dict(m) for m in history]
    prefix = msgs[: int(len(msgs) * cut)]
    closed = [u for u in pack_units(prefix, "reader", tokenizer, size, final=False) if u.closed]
    assert pack_units(msgs, "reader", tokenizer, size, final=False)[: len(closed)] == closed


def test_unit_key_changes_when_a_message_is_edited_under_the_same_id(tokenizer):
    msgs = (Message(role="assistant", content="```bash\nls\n```", id="a1"),
            Message(role="user", content="file.txt", id="o1"))
    edited = (msgs[0], Message(role="user", content="file.txt\nother.txt", id="o1"))
    assert unit_key(msgs, "agent", None) == unit_key(msgs, "agent", None)
    assert unit_key(msgs, "agent", None) != unit_key(edited, "agent", None)
    assert unit_key(msgs, "agent", None) != unit_key(msgs, "agent", "parent")
    assert unit_key(msgs, "agent", None) != unit_key(msgs, "reader", None)
    packed = pack_units(list(msgs), "agent", tokenizer, 1, final=True)[0]
    assert to_unit(packed, "agent", None).key == unit_key(msgs, "agent", None)
    # Metadata is not what a message says: it does not change the key.
    tagged = (msgs[0], Message(role="user", content="file.txt", id="o1", metadata={"x": 1}))
    assert unit_key(tagged, "agent", None) == unit_key(msgs, "agent", None)


def test_an_edit_forks_a_new_chain_and_keeps_the_old_units(tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=100_000, tuning=Tuning(agent_unit_tokens=40)), tokenizer=tokenizer,
                   embedder=hashing_embedder)
    history = [{"role": "user", "content": "task", "id": "task"}]
    for i in range(6):
        history += [{"role": "assistant", "content": f"```bash\ncat f{i}\n```", "id": f"a{i}"},
                    {"role": "user", "content": f"contents of f{i} " * 20, "id": f"o{i}"}]
    assert mem.ingest(history) == 5
    before = [n.unit_key for n in mem.store.notes("default")]
    edited = [dict(m) for m in history]
    edited[4] = {**edited[4], "content": "EDITED contents of f1 " * 20}  # same id, new text
    written = mem.ingest(edited)
    after = [n.unit_key for n in mem.store.notes("default")]
    assert after[: len(before)] == before, "old units are kept"
    assert written == 4, "the unit holding the edit and every later unit fork a new chain"
    assert mem.ingest(edited) == 0
