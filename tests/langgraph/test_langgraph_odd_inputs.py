"""A ``create_agent`` agent with ``FlexAMemMiddleware`` keeps the task and stays within the budget.

The task is the thread's first user message. Each test runs a real agent loop, driven by
langchain-core's list fake chat model, through an investigation whose tool outputs outgrow
the budget, and then, on the same thread, meets one odd input: an empty question, a
50,000-character question, a 300-token budget, an image (a question with a LangChain image
content block), an orphan tool result (a ``ToolMessage`` whose call is not in the history).
The model answers it with one more tool call and a reply. Each runs through ``invoke`` and
``ainvoke`` (the middleware's sync and async hooks). Every request the model receives
must hold the task (whole, or cut with the visible mark when the budget cannot hold it),
keep the message rules (one system message, first; every tool call answered, no orphan
result) and stay within 0.95 x budget as the middleware counts what is sent: the system
prompt and the tool schemas, which LangChain sends apart from the messages, included
(also counted independently, as chat-completions JSON, within the budget). The graph
state keeps the complete history, and no message of the host is changed.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from flexamem_langgraph import FlexAMemMiddleware, is_memory_message, to_core
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from flexamem_core import FlexAMem
from flexamem_core.host import config_for_budget
from flexamem_core.index.embeddings import HashingEmbedder
from tests.odd_inputs import ODD, PNG_B64, budget_for, is_task, question_for
from tests.wire_count import request_tokens

BUDGET = 3000
QUESTION = "Which port does the client use?"


def _budget(odd: str) -> int:
    return budget_for(odd, BUDGET)


def _odd_turn(odd: str) -> list[BaseMessage]:
    """The messages the odd turn adds to the thread (the question last), with ids (as the reducer would give)."""
    if odd in ("empty question", "50,000-character question"):
        return [HumanMessage(question_for(odd, QUESTION), id="question")]
    if odd == "an image":
        return [HumanMessage(content=[{"type": "text", "text": "Here is the shelf label. " + QUESTION},
                                      {"type": "image", "base64": PNG_B64, "mime_type": "image/png"}], id="question")]
    if odd == "an orphan tool result":
        return [ToolMessage("shelf count: 48", tool_call_id="call-from-nowhere", name="count", id="orphan"),
                HumanMessage(QUESTION, id="question")]
    return [HumanMessage(QUESTION, id="question")]


def _holds_task(request: list[BaseMessage], task: str) -> bool:
    return any(isinstance(m, HumanMessage) and is_task(m.text, task) for m in request)


def _investigation(lg: SimpleNamespace, tag: str, budget: int) -> list[AIMessage]:
    """The shared investigation: ten tool turns (one with three parallel calls) and an answer.

    At 300 tokens the parallel turn is three turns of one call: the system prompt and the two
    tool schemas take 111 tokens, and three calls with their results, even cut to their marks,
    do not fit beside them and the task (the documented ``BudgetError`` of a budget too small
    for the fixed prompt with everything else cut to its marks).
    """
    script = lg.investigation_script(tag)
    if budget >= BUDGET:
        return script
    single: list[AIMessage] = []
    for reply in script:
        single += [AIMessage(content=reply.content, tool_calls=[call]) for call in reply.tool_calls] or [reply]
    return single


def _replies(lg: SimpleNamespace, tag: str, budget: int) -> list[AIMessage]:
    """The investigation, then one tool call and a reply to the odd turn."""
    return [*_investigation(lg, tag, budget),
            AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"{tag}/src/port.py"},
                                               "id": f"{tag}-odd", "type": "tool_call"}]),
            AIMessage(content="The client uses port 5432.")]


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
@pytest.mark.parametrize("odd", ODD)
def test_create_agent_keeps_the_task_and_every_call_within_the_budget(lg: SimpleNamespace, odd: str,
                                                                       run: str) -> None:
    budget = _budget(odd)
    tag = f"odd{ODD.index(odd)}{run[0]}"
    task = lg.task_text(tag)
    # The config the middleware makes for this budget itself; the hashing embedder keeps the test fast.
    mem = FlexAMem(config_for_budget(budget), embedder=HashingEmbedder())
    renders: list[Any] = []
    model = lg.ScriptedToolModel(responses=_replies(lg, tag, budget))
    agent = create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT,
                         middleware=[FlexAMemMiddleware(mem, on_render=renders.append)], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": tag}, "recursion_limit": 100}

    def invoke(messages: list[BaseMessage]) -> None:  # the middleware's sync or async hook
        if run == "invoke":
            agent.invoke({"messages": messages}, config)
        else:
            asyncio.run(agent.ainvoke({"messages": messages}, config))

    first = [HumanMessage(task, id="task")]  # with ids: LangGraph's reducer gives a message without one an id
    invoke(first)
    before = list(agent.get_state(config).values["messages"])
    odd_turn = _odd_turn(odd)
    sent_before = lg.snapshot(before + first + odd_turn)
    invoke(odd_turn)

    # Every request the model received.
    assert len(model.received) == len(_replies(lg, tag, budget)) == len(renders)
    extra = lg.extra_tokens(mem, lg.SYSTEM_PROMPT, lg.TOOLS)
    tools = [convert_to_openai_tool(t) for t in lg.TOOLS]
    for k, request in enumerate(model.received):
        lg.check_structure(request)
        assert isinstance(request[0], SystemMessage) and request[0].text == lg.SYSTEM_PROMPT
        assert _holds_task(request, task), (k, [(type(m).__name__, m.text[:40]) for m in request])
        # As the middleware counts what is sent: the messages after the system prompt, plus the
        # system prompt and the tool schemas that LangChain sends apart from them.
        assert mem.count_messages(to_core(request[1:]).messages, extra_tokens=extra) <= int(0.95 * budget), k
        assert request_tokens(convert_to_openai_messages(request), tools) <= budget, k
    assert any(not r.rendered.passthrough for r in renders[:len(_investigation(lg, tag, budget))]), \
        "the investigation must outgrow the budget"
    assert not renders[-1].rendered.passthrough

    # The odd turn reached the model (the question whole, or cut with the mark).
    question = odd_turn[-1]
    first_after = model.received[len(_investigation(lg, tag, budget))]
    assert any(m is question or (isinstance(m, HumanMessage) and is_task(m.text, question.text))
               for m in first_after)

    # The host's messages were not changed, and the graph state keeps the complete history.
    assert lg.snapshot(before + first + odd_turn) == sent_before
    state = agent.get_state(config).values["messages"]
    assert lg.snapshot(state[:len(before)]) == lg.snapshot(before)
    assert state[0].text == task
    assert lg.snapshot(state[len(before):len(before) + len(odd_turn)]) == lg.snapshot(odd_turn)
    assert len(state) == len(before) + len(odd_turn) + 3  # the odd turn, the tool call, its result, the reply
    assert isinstance(state[-2], ToolMessage) and state[-2].text == lg.file_text(f"{tag}/src/port.py")
    assert not any(is_memory_message(m) for m in state)
