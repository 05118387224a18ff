"""OpenAI-style dict histories passed to ``FlexAMem.render`` as a loop does: the same dicts
plus a new step per call are read once each (the namespace's copy grows), and every other
change, a dict replaced or edited in place, is still seen."""

from __future__ import annotations

import copy
import json

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig, InMemoryStore, Message, MessageError
from flexamem_core.model.history import DictSources


def _dicts(steps: int) -> list[dict]:
    out = [{"role": "system", "content": "You are a coding agent."},
           {"role": "user", "content": "Fix the failing test in src/."}]
    for i in range(steps):
        out.append({"role": "assistant", "content": f"Reading mod_{i}", "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "shell", "arguments": json.dumps({"command": f"cat src/mod_{i}.py"})}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}",
                    "content": "\n".join(f"src/mod_{i}.py:{j}: value_{i}_{j} = f({j})" for j in range(40))})
    return out


def test_only_the_new_dicts_are_read_and_the_copy_grows_in_place():
    history = _dicts(3)
    copy_ = [Message.from_dict(d) for d in history]
    sources = DictSources()
    sources.remember(history)
    kept = list(copy_)
    history += _dicts(4)[-2:]
    assert sources.grow(copy_, history)
    assert copy_[:len(kept)] == kept and all(a is b for a, b in zip(copy_, kept))  # the old objects, reused
    assert copy_ == [Message.from_dict(d) for d in history]


@pytest.mark.parametrize("change", ["replaced", "content edited in place", "tool calls edited in place",
                                    "shorter", "a Message among the dicts"])
def test_any_other_change_is_not_taken_for_growth(change):
    history = _dicts(3)
    copy_ = [Message.from_dict(d) for d in history]
    sources = DictSources()
    sources.remember(history)
    changed = list(history)
    if change == "replaced":
        changed[3] = {**changed[3], "content": "another output"}
    elif change == "content edited in place":
        changed[3]["content"] = "edited output"
    elif change == "tool calls edited in place":
        changed[2]["tool_calls"] = []
    elif change == "shorter":
        changed = changed[:-1]
    else:
        changed.append(Message(role="user", content="a core message"))
    before = list(copy_)
    assert not sources.grow(copy_, changed)
    assert copy_ == before


def test_a_growing_dict_history_renders_exactly_as_the_same_history_read_afresh(hashing_embedder):
    grown = FlexAMem(FlexAMemConfig(budget=2000), store=InMemoryStore(), embedder=hashing_embedder)
    fresh = FlexAMem(FlexAMemConfig(budget=2000), store=InMemoryStore(), embedder=hashing_embedder)
    history = _dicts(2)
    rendered = 0
    for step in range(3, 40):
        history += _dicts(step)[-2:]  # the loop appends to its own list of dicts
        r = grown.render(history, namespace="t")
        expected = fresh.render(copy.deepcopy(history), namespace="t")  # new dicts: nothing to reuse
        assert r.messages == expected.messages and r.report == expected.report
        rendered += not r.passthrough
    assert rendered > 20


def test_an_edit_in_place_is_seen_by_the_next_render(hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=8000), embedder=hashing_embedder)
    history = _dicts(4)
    mem.render(history, namespace="t")
    history[-1]["content"] = "EDITED: the output now says something else"
    r = mem.render(history, namespace="t")
    assert any("EDITED" in m.text for m in r.messages)


def test_a_bad_new_dict_names_its_index_and_leaves_the_copy_as_it_was(hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=8000), embedder=hashing_embedder)
    history = _dicts(2)
    mem.render(history, namespace="t")
    history.append({"role": "wizard", "content": "?"})
    with pytest.raises(MessageError, match=f"message {len(history) - 1}"):
        mem.render(history, namespace="t")
    history.pop()
    history += _dicts(3)[-2:]
    assert mem.render(history, namespace="t").messages[-1].content.startswith("src/mod_2.py")


def test_edits_in_place_are_checked_among_the_newest_messages_and_replacements_anywhere():
    """Each call compares every seen message by identity (a replaced, removed or inserted dict
    anywhere breaks the match) and reads values only of the newest EDIT_WINDOW, so a call
    costs what is new; an edit in place further back is the documented blind spot."""
    from flexamem_core.model.history import EDIT_WINDOW

    n_steps = EDIT_WINDOW  # 2 * EDIT_WINDOW + 2 dicts: the oldest are outside the window
    history = _dicts(n_steps)
    sources, copy_ = DictSources(), [Message.from_dict(d) for d in history]
    sources.remember(history)
    grown = history + _dicts(n_steps + 1)[-2:]

    near = list(grown)
    near[len(history) - EDIT_WINDOW] = {**near[len(history) - EDIT_WINDOW]}  # an equal copy: still growth
    assert sources.grow(list(copy_), near)

    for i in (3, len(history) - 1):  # far back and newest: a replaced dict is seen anywhere
        replaced = list(grown)
        replaced[i] = {**replaced[i], "content": "another output"}
        assert not remembered(history).grow(list(copy_), replaced)

    in_window = len(history) - EDIT_WINDOW
    edited = copy.deepcopy(history)
    seen = remembered(edited)
    edited[in_window]["content"] = "edited in place"
    assert not seen.grow(list(copy_), edited + _dicts(n_steps + 1)[-2:])

    edited = copy.deepcopy(history)
    seen = remembered(edited)
    edited[in_window - 1]["content"] = "edited in place, outside the window"
    assert seen.grow(list(copy_), edited + _dicts(n_steps + 1)[-2:])


def remembered(history: list[dict]) -> DictSources:
    sources = DictSources()
    sources.remember(history)
    return sources
