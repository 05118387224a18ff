"""The namespace's own copy of the history, grown in place while the host's list only grows:
a call costs what is new, and any other change to the history is still seen."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig, InMemoryStore, Message, ToolCall
from flexamem_core.model.history import MessagesView, grow_copy
from flexamem_core.request.layout import split_layout


def _step(i: int, size: int = 60) -> list[Message]:
    call = ToolCall(name="shell", arguments=json.dumps({"command": f"cat src/mod_{i}.py"}), id=f"c{i}")
    out = "\n".join(f"src/mod_{i}.py:{j}: value_{i}_{j} = compute({j})" for j in range(size))
    return [Message(role="assistant", content=f"Reading mod_{i}", tool_calls=(call,), id=f"a{i}"),
            Message(role="tool", content=out, tool_call_id=f"c{i}", name="shell", id=f"t{i}")]


def _start() -> list[Message]:
    return [Message(role="system", content="You are a coding agent.", id="s"),
            Message(role="user", content="Fix the failing test.", id="u")]


def test_grow_copy_grows_only_a_list_that_starts_with_the_copy():
    base = [*_start(), *_step(0)]
    copy = list(base)
    host = [*base, *_step(1)]
    assert grow_copy(copy, host) and copy == host and copy is not host
    assert grow_copy(copy, host)  # the same history again: nothing new
    for changed in ([*host[:2], *_step(9), *host[4:]],          # a message replaced in the middle
                    host[:-1],                                   # shorter
                    tuple(host),                                 # not a list
                    [*host, {"role": "user", "content": "hi"}]):  # a dict to convert
        before = list(copy)
        assert not grow_copy(copy, changed)
        assert copy == before
    assert not grow_copy([], host)


def test_an_equal_message_in_place_of_the_same_object_still_continues_the_copy():
    host = [*_start(), *_step(0), *_step(1)]
    copy = list(host)
    again = [Message(role=m.role, content=m.content, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                     id=m.id, name=m.name) for m in host[:-1]] + [host[-1]]
    assert grow_copy(copy, [*again, *_step(2)])


@pytest.mark.parametrize("start", [0, 2, 5])
def test_messages_view_reads_as_the_slice(start):
    items = [*_start(), *_step(0), *_step(1), *_step(2)]
    view = MessagesView(items, start)
    expected = items[start:]
    assert len(view) == len(expected) and list(view) == expected
    for i in range(len(expected)):
        assert view[i] is expected[i] and view[-1 - i] is expected[-1 - i]
    for a, b in [(0, None), (1, 3), (2, 100), (-2, None), (3, 1)]:
        assert view[a:b] == expected[a:b]
    assert view[::2] == expected[::2]
    with pytest.raises(IndexError):
        view[len(expected)]
    items.extend(_step(3))  # the view follows the list it reads
    assert len(view) == len(items) - start


@pytest.mark.parametrize("head", [_start(), _start()[1:], _start()[:1], []])
def test_a_shared_layout_has_the_body_a_copied_one_has(head):
    msgs = [*head, *_step(0), *_step(1)]
    copied, shared = split_layout(msgs, "agent"), split_layout(msgs, "agent", shared=True)
    assert isinstance(shared.body, MessagesView) and shared.body.over(msgs)
    assert list(shared.body) == list(copied.body) and (shared.system, shared.task) == (copied.system, copied.task)


def _run(mem: FlexAMem, host: list[Message], steps: range, namespace: str = "t"):
    out = []
    for i in steps:
        host.extend(_step(i))  # the host appends to the same list, as agent loops do
        out.append(mem.render(host, namespace=namespace))
    return out


def test_a_host_that_appends_to_one_list_gets_what_a_fresh_copy_per_call_gets():
    """The same calls, once with one growing list (the copy grows in place) and once with a
    list of new, equal messages every call (copied anew): byte-identical requests, reports and
    stored units."""
    cfg = FlexAMemConfig(budget=2500)
    grown_mem, fresh_mem = FlexAMem(cfg, store=InMemoryStore()), FlexAMem(cfg, store=InMemoryStore())
    host = _start()
    grown = _run(grown_mem, host, range(40))
    fresh, h = [], _start()
    for i in range(40):
        h = [*h, *_step(i)]
        # new, equal message objects every call (as an adapter that converts its messages anew)
        fresh.append(fresh_mem.render([replace(m) for m in h], namespace="t"))
    assert [r.messages for r in grown] == [r.messages for r in fresh]
    assert [r.report["cache"] for r in grown] == [r.report["cache"] for r in fresh]
    assert any(r.report["cache"]["step"] == "append" for r in grown)
    assert [n.unit_key for n in grown_mem.store.notes("t")] == [n.unit_key for n in fresh_mem.store.notes("t")]
    # white-box: the first run took the grown path (the copy kept, the chain matched on it), the second did not
    space, other = grown_mem.state("t"), fresh_mem.state("t")
    sent = grown_mem._stable.previous("t", space, space.history)
    assert sent is not None and sent.source is space.history and space.chain_on_history
    assert not other.chain_on_history


def test_a_tuple_or_a_generator_is_read_once():
    """A history that is not a list is converted once: a generator, which can be read only
    once, renders as the list it yields would."""
    msgs = [*_start(), *_step(0), *_step(1)]
    as_list = FlexAMem(FlexAMemConfig(budget=2500), store=InMemoryStore()).render(list(msgs))
    for history in (tuple(msgs), (m for m in msgs)):
        got = FlexAMem(FlexAMemConfig(budget=2500), store=InMemoryStore()).render(history)
        assert got.messages == as_list.messages and got.messages


def test_a_message_changed_in_the_hosts_list_is_seen_and_nothing_returned_changes():
    mem = FlexAMem(FlexAMemConfig(budget=2500), store=InMemoryStore())
    host = _start()
    first = _run(mem, host, range(30))
    kept = [list(r.messages) for r in first]
    snapshot = list(host)
    host[4] = Message(role="assistant", content="Reading a different file", tool_calls=host[4].tool_calls,
                      id="a1-edited")  # the host rewrites an early step in place
    before = len(mem.store.notes("t"))
    after = mem.render(host, namespace="t")
    assert after.report["cache"]["step"] != "append"  # not taken as the previous request grown
    assert len(mem.store.notes("t")) > before  # the changed history is written as a new branch
    assert [list(r.messages) for r in first] == kept  # requests already returned are never changed
    assert host[:4] == snapshot[:4] and host[5:] == snapshot[5:]  # the host's list is not touched
    # and an ingest of the list as it is now writes nothing more: the copy follows the host
    assert mem.ingest(host, namespace="t") == 0
