"""``keep_task``: a conversation's first user message kept whole ahead of the memory in every
request, for reader histories too (a chat engine or an agent that opens with what it was asked)."""

from __future__ import annotations

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.request.cuts import TRUNCATION_MARK

TASK = "Plan the Lisbon trip for me; the booking reference is LX-7781."
MARK = TRUNCATION_MARK.split("{n}")[0]


def _chat(turns: int) -> list[dict]:
    history = [{"role": "system", "content": "You are a travel assistant."}, {"role": "user", "content": TASK}]
    for i in range(turns):
        history.append({"role": "assistant", "content": f"Answer {i}: " + f"museum {i} opens at nine " * 25})
        history.append({"role": "user", "content": f"And what about stop {i + 1}?"})
    return history


@pytest.mark.parametrize("budget", [300, 1000, 4000])
def test_every_render_of_a_growing_chat_holds_the_task_right_after_the_system_prompt(budget, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=budget, history="reader", keep_task=True), embedder=hashing_embedder)
    history = _chat(40)
    rendered = 0
    for end in range(4, len(history) + 1, 2):
        r = mem.render(history[:end], namespace="chat")
        assert r.messages[1].role == "user" and r.messages[1].content == TASK
        assert r.tokens <= 0.95 * budget
        rendered += not r.passthrough
    assert rendered > 0
    notes = mem.store.notes("chat")
    stored = [m.content for n in notes for m in mem.store.get_unit("chat", n.unit_key).messages]
    assert notes and TASK not in stored  # fixed in every request, so never a unit


def test_without_it_a_reader_history_lets_the_first_turn_go_into_the_memory(hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=1000, history="reader"), embedder=hashing_embedder)
    r = mem.render(_chat(40), namespace="chat")
    assert not any(m.content == TASK for m in r.messages)


def test_a_huge_question_is_cut_and_the_task_kept(hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=2000, history="reader", keep_task=True), embedder=hashing_embedder)
    history = [*_chat(20), {"role": "assistant", "content": "Sure."},
               {"role": "user", "content": "Why? " + "because " * 12000}]
    r = mem.render(history, namespace="chat")
    assert r.messages[1].content == TASK
    assert MARK in r.messages[-1].content and r.messages[-1].content.startswith("Why? ")
    assert r.report["task_cut_messages"] == 1 and r.tokens <= 0.95 * 2000
    assert history[-1]["content"].count("because") == 12000  # the caller's history is untouched


def test_a_huge_task_and_a_huge_question_are_both_cut_to_fit(hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=2000, history="reader", keep_task=True), embedder=hashing_embedder)
    big_task = TASK + " " + "detail " * 8000
    history = [{"role": "user", "content": big_task}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "Why? " + "because " * 12000}]
    r = mem.render(history, namespace="chat")
    assert r.messages[0].content.startswith(TASK) and MARK in r.messages[0].content
    assert MARK in r.messages[-1].content
    assert r.report["task_cut_messages"] == 2 and r.tokens <= 0.95 * 2000
