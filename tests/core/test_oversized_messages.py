"""One rule for a message larger than its room, wherever it sits: cut in the middle with the mark.

A 43k-token user message is cut the same way as the task (first message), as a later turn
and as a tool output: head and tail kept, the visible ``TRUNCATION_MARK`` between them, the
request within the budget. Only a system prompt too large for the budget (the one part never
cut) is a ``BudgetError``. The task's cut logs one WARNING per namespace.
"""

from __future__ import annotations

import copy
import logging

import pytest

from flexamem_core import BudgetError, FlexAMem, Message
from flexamem_core.request.properties import Context, problems

from ..oversized import is_cut, long_text
from .checks import independent_tokens, steps, structure_problem

BUDGET = 4000


def assert_cut(m: Message) -> None:
    assert is_cut(m.text), m.text[:200]


def assert_sendable(r, history: list[dict], kind: str = "agent") -> None:
    assert r.tokens <= int(BUDGET * 0.95) and r.tokens == independent_tokens(r.messages)
    assert structure_problem(r.messages) is None
    assert problems(r.messages, Context([Message.from_dict(m) for m in history], r.report, kind)) == {}


@pytest.fixture(scope="module")
def big() -> str:
    return long_text()


def agent_mem(mem, **settings) -> FlexAMem:
    return mem(budget=BUDGET, **settings)


@pytest.mark.parametrize("stable", [True, False])
def test_a_huge_task_is_cut_not_an_error(mem, big, stable, caplog):
    m = agent_mem(mem, cache_stable=stable)
    history = [{"role": "system", "content": "You are a careful agent."}, {"role": "user", "content": big}]
    before = copy.deepcopy(history)
    with caplog.at_level(logging.WARNING, logger="flexamem"):
        r = m.render(history, namespace=f"huge-task-{stable}")
        later = [*history, *steps(3)]
        r2 = m.render(later, namespace=f"huge-task-{stable}")
    assert history == before
    assert r.report["task_cut_messages"] == 1 and r.report["newest_step"] == "cut"
    assert_cut(r.messages[1])
    assert_sendable(r, history)
    # later calls keep the task cut the same way (a stable prefix) and the steps after it
    assert r2.messages[1].text == r.messages[1].text and r2.report["task_cut_messages"] == 1
    assert_sendable(r2, later)
    warnings = [rec for rec in caplog.records if rec.levelno == logging.WARNING and "cut in the middle" in rec.message]
    assert len(warnings) == 1 and warnings[0].name == "flexamem"
    assert m.render(history, namespace=f"huge-task-{stable}-again").messages == r.messages  # deterministic


def test_the_same_text_as_a_later_turn_is_cut_the_same_way(mem, big):
    history = [{"role": "system", "content": "You are a careful agent."}, {"role": "user", "content": "Hello."},
               {"role": "assistant", "content": "Hi, what should I look at?"}, {"role": "user", "content": big}]
    r = agent_mem(mem).render(history)
    assert_cut(r.messages[-1])
    assert r.report["newest_step"] == "cut"
    assert_sendable(r, history)


def test_the_same_text_as_a_tool_output_is_cut_the_same_way(mem, big):
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "Read the log."},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "read", "arguments": "{}"}]},
               {"role": "tool", "tool_call_id": "c1", "content": big}]
    r = agent_mem(mem).render(history)
    assert_cut(r.messages[-1])
    assert_sendable(r, history)


def test_a_reader_s_huge_current_turn_is_cut(mem, big):
    history = [{"role": "user", "content": "My dog is called Rex."}, {"role": "assistant", "content": "Noted."},
               {"role": "user", "content": big}]
    r = mem(budget=BUDGET, history="reader").render(history)
    assert r.report["task_cut_messages"] == 1
    assert_cut(r.messages[-1])
    assert_sendable(r, history, "reader")


def test_a_huge_task_with_a_huge_newest_step_both_cut(mem, big):
    history = [{"role": "user", "content": big},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "read", "arguments": "{}"}]},
               {"role": "tool", "tool_call_id": "c1", "content": big}]
    r = mem(budget=600).render(history)
    assert_cut(r.messages[0])
    assert_cut(r.messages[-1])
    assert r.tokens <= 570


def test_only_a_system_prompt_too_large_for_the_budget_is_an_error(mem, big):
    with pytest.raises(BudgetError, match="too small for the fixed prompt"):
        agent_mem(mem).render([{"role": "system", "content": big}, {"role": "user", "content": "go"}])
