"""Every request a ``create_agent`` loop sends, counted independently as the provider gets it.

The model's input (system prompt included) is turned into the chat-completions JSON by
langchain-core's own ``convert_to_openai_messages``, the tools by ``convert_to_openai_tool``,
and counted by :mod:`tests.wire_count` (OpenAI's cookbook rule, tool calls and schemas as
JSON). The library's count of the same request (``rendered.tokens``, the system prompt and
the tool schemas included) is never more than 1% below it, and the request fits the budget.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from flexamem_langgraph import FlexAMemMiddleware, LangChainRender
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_core.messages import HumanMessage, convert_to_openai_messages
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from tests.wire_count import request_tokens, shortfall

UNICODE_TASK = "Prüfe, warum der Dienst «Zahlungen» die Datenbank nicht erreicht (日本語のログも読む) 🙂. "


def _run(lg: SimpleNamespace, mem: Any, tag: str, task: str, stack: list[Any]) -> tuple[list[LangChainRender], Any]:
    outcomes: list[LangChainRender] = []
    model = lg.ScriptedToolModel(responses=lg.investigation_script(tag))
    agent = create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT,
                         middleware=[*stack, FlexAMemMiddleware(mem, on_render=outcomes.append)],
                         checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage(task)]}, {"configurable": {"thread_id": tag}, "recursion_limit": 100})
    return outcomes, model


@pytest.mark.parametrize(("budget", "unicode", "context_editing"), [
    (1500, False, False), (3000, True, False), (6000, False, False), (2500, False, True)])
def test_no_request_is_counted_more_than_one_percent_low(lg: SimpleNamespace, make_mem: Any, budget: int,
                                                         unicode: bool, context_editing: bool) -> None:
    mem = make_mem(budget=budget)
    tag = f"wire{budget}"
    task = (UNICODE_TASK * 3 if unicode else "") + lg.task_text(tag)
    stack = [ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=1200, keep=2)])] if context_editing else []
    outcomes, model = _run(lg, mem, tag, task, stack)
    tools = [convert_to_openai_tool(t) for t in lg.TOOLS]
    assert len(outcomes) == len(model.received) == len(lg.investigation_script(tag))
    worst, best = -1.0, 1.0
    for outcome, call in zip(outcomes, model.received, strict=True):
        independent = request_tokens(convert_to_openai_messages(call), tools)
        low = shortfall(outcome.rendered.tokens, independent)
        worst, best = max(worst, low), min(best, low)
        assert independent <= budget, f"sent {independent} tokens at budget {budget}"
    print(f"langgraph budget {budget}: {len(outcomes)} requests, "
          f"low by {100 * best:+.2f}% to {100 * worst:+.2f}%")
    assert worst <= 0.01, f"counted {100 * worst:.2f}% low"
    assert any(not o.rendered.passthrough for o in outcomes), "the loop must outgrow the budget"
