"""A user message larger than the budget through ``create_agent``: cut with the mark, first or third.

Before, a 43k-token first (task) message raised ``BudgetError`` out of ``agent.invoke``
while the same text as the third turn was cut; now both are cut the same way.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from flexamem_langgraph import FlexAMemMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, convert_to_openai_messages
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from tests.oversized import is_cut, long_text
from tests.wire_count import request_tokens

BUDGET = 4000


def _agent(lg: SimpleNamespace, mem: Any, replies: list[AIMessage]) -> tuple[Any, Any]:
    model = lg.ScriptedToolModel(responses=replies)
    agent = create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT, middleware=[FlexAMemMiddleware(mem)],
                         checkpointer=InMemorySaver())
    return agent, model


def _check_sent(lg: SimpleNamespace, model: Any, big: str) -> None:
    tools = [convert_to_openai_tool(t) for t in lg.TOOLS]
    for call in model.received:
        assert request_tokens(convert_to_openai_messages(call), tools) <= BUDGET
        assert big not in [m.text for m in call]
        lg.check_structure(call)
    assert any(is_cut(m.text) for m in model.received[0] if isinstance(m, HumanMessage))


def test_a_huge_first_message_is_cut_not_an_error(lg: SimpleNamespace, make_mem: Any) -> None:
    big = long_text()
    replies = [AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": "a.txt"}, "id": "c1"}]),
               AIMessage(content="Done.")]
    agent, model = _agent(lg, make_mem(budget=BUDGET), replies)
    result = agent.invoke({"messages": [HumanMessage(big)]}, {"configurable": {"thread_id": "huge-first"}})
    assert result["messages"][0].text == big  # the state keeps it whole
    assert len(model.received) == 2
    _check_sent(lg, model, big)


def test_a_huge_third_message_is_cut_the_same_way(lg: SimpleNamespace, make_mem: Any) -> None:
    big = long_text()
    agent, model = _agent(lg, make_mem(budget=BUDGET), [AIMessage(content="Hi."), AIMessage(content="Done.")])
    config = {"configurable": {"thread_id": "huge-third"}}
    agent.invoke({"messages": [HumanMessage("Hello.")]}, config)
    agent.invoke({"messages": [HumanMessage(big)]}, config)
    assert len(model.received) == 2 and model.received[1][-1].text != big
    assert is_cut(model.received[1][-1].text)
    model.received = model.received[1:]
    _check_sent(lg, model, big)
