"""Every LlamaIndex engine, with the memory's defaults, keeps the task and stays within its bound.

The task is the conversation's first user message. Each engine runs a conversation that
outgrows the budget and then meets one odd input: an empty question, a 50,000-character
question, a 300-token budget, an image, an orphan tool result. Every request the LLM
receives must hold the task (whole, or cut with the visible mark when the budget cannot
hold it) and stay within the engine's documented bound:

- ``SimpleChatEngine``: the whole request, its system prompt included, within 0.95 x budget;
- ``CondensePlusContextChatEngine``: the chat history the memory returns within 0.95 x budget
  (the engine adds retrieved context to its system prompt afterwards and fits that to the
  LLM's window itself);
- ``FunctionAgent`` through ``agent_memory``: every LLM call of the tool loop within 0.95 x budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from flexamem_llamaindex import FlexAMemory, agent_memory, to_core_list
from li_helpers import Call, ScriptedLLM, add, assert_valid_structure, read_record, record_text
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, MessageRole, TextBlock
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import FunctionTool

from flexamem_core.index.embeddings import HashingEmbedder
from tests.odd_inputs import ODD, PNG, budget_for, is_task, question_for

TASK = "Audit warehouse 12 for me: the ledger to reconcile is LEDGER-5521, due Friday."
SYSTEM = "You are a careful auditor."
BUDGET = 2000
TOOLS = [FunctionTool.from_defaults(read_record), FunctionTool.from_defaults(add)]


def _budget(odd: str) -> int:
    return budget_for(odd, BUDGET)


def _question(odd: str) -> str:
    return question_for(odd, "Which ledger am I reconciling?")


def _before_question(odd: str, memory: FlexAMemory) -> None:
    """What the odd input puts into the conversation before its question."""
    if odd == "an image":
        memory.put(ChatMessage(role=MessageRole.USER, blocks=[TextBlock(text="Here is the shelf label."),
                                                              ImageBlock(image=PNG, image_mimetype="image/png")]))
        memory.put(ChatMessage(role=MessageRole.ASSISTANT, content="I see the label."))
    elif odd == "an orphan tool result":
        memory.put(ChatMessage(role=MessageRole.TOOL, content="shelf count: 48",
                               additional_kwargs={"tool_call_id": "call-from-nowhere", "name": "count"}))


def _holds_task(request: list[ChatMessage]) -> bool:
    for m in request:
        text = m.content or ""
        if m.role == MessageRole.USER and is_task(text, TASK):
            return True
    return False


def _tokens(memory: FlexAMemory, messages: list[ChatMessage]) -> int:
    return memory.engine.count_messages(to_core_list(messages))


Chat = tuple[ScriptedLLM, FlexAMemory]


def _chat(engine_of: Callable[[FlexAMemory, ScriptedLLM], Any], odd: str, namespace: str) -> Chat:
    script = ScriptedLLM(plan=["On it."] + [record_text(i, words=200) for i in range(12)] + ["LEDGER-5521."])
    memory = FlexAMemory.from_defaults(budget=_budget(odd), namespace=namespace, embedder=HashingEmbedder())
    engine = engine_of(memory, script)
    engine.chat(TASK)
    for i in range(12):
        engine.chat(f"What does record {i} say?")
    _before_question(odd, memory)
    engine.chat(_question(odd))
    return script, memory


class FixedRetriever(BaseRetriever):
    """Two fixed notes (no embedding model needed)."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text="Ledgers are reconciled weekly."), score=1.0),
                NodeWithScore(node=TextNode(text="Warehouse 12 stores pallets."), score=0.5)]


@pytest.mark.parametrize("odd", ODD)
def test_simple_chat_engine_keeps_the_task_and_the_whole_request_within_the_budget(odd: str) -> None:
    script, memory = _chat(lambda mem, s: SimpleChatEngine.from_defaults(
        llm=s.llm(is_chat_model=True), memory=mem, system_prompt=SYSTEM), odd, f"li-task-simple-{ODD.index(odd)}")
    assert len(script.received) == 14
    for request in script.received:
        assert_valid_structure(request)
        assert request[0].content == SYSTEM
        assert _holds_task(request), [m.content[:40] for m in request]
        assert _tokens(memory, request) <= int(0.95 * _budget(odd))
    assert not memory.last_render.passthrough
    assert memory.get_all()[0].content == TASK  # the log keeps everything


@pytest.mark.parametrize("odd", ODD)
def test_condense_plus_context_keeps_the_task_and_the_history_within_the_budget(odd: str) -> None:
    gets: list[list[ChatMessage]] = []

    def engine(mem: FlexAMemory, s: ScriptedLLM) -> CondensePlusContextChatEngine:
        original = mem.get

        def get(*args: Any, **kwargs: Any) -> list[ChatMessage]:
            out = original(*args, **kwargs)
            gets.append(list(out))
            return out

        object.__setattr__(mem, "get", get)  # observe what the engine takes from the memory
        return CondensePlusContextChatEngine.from_defaults(
            retriever=FixedRetriever(), llm=s.llm(context_window=128_000, is_chat_model=True), memory=mem,
            system_prompt=SYSTEM)

    script, memory = _chat(engine, odd, f"li-task-condense-{ODD.index(odd)}")
    assert len(gets) == 14
    for history in gets[1:]:  # the first call's history is the task itself, as the current turn
        assert _holds_task(history)
        assert _tokens(memory, history) <= int(0.95 * _budget(odd))
    last = script.received[-1]
    assert_valid_structure(last)
    assert "Ledgers are reconciled weekly." in (last[0].content or "")
    assert _holds_task(last)


@pytest.mark.parametrize("odd", ODD)
def test_function_agent_keeps_the_task_and_every_call_within_the_budget(odd: str) -> None:
    script = ScriptedLLM(plan=[])
    for i in range(6):
        script.plan += [[Call("read_record", {"record_id": 10 + i})], f"Record {10 + i} read."]
    script.plan += [[Call("add", {"a": 2, "b": 3})], "LEDGER-5521."]
    memory, llm = agent_memory(script.llm(), namespace=f"li-task-agent-{ODD.index(odd)}", budget=_budget(odd),
                               embedder=HashingEmbedder())
    agent = FunctionAgent(tools=TOOLS, llm=llm, system_prompt=SYSTEM)

    async def run() -> None:
        await agent.run(user_msg=TASK, memory=memory)
        for i in range(5):
            await agent.run(user_msg=f"Read record {11 + i}.", memory=memory)
        _before_question(odd, memory)
        question = _question(odd)
        if odd == "empty question":  # FunctionAgent.run refuses an empty string, not an empty message
            await agent.run(user_msg=ChatMessage(role=MessageRole.USER, content=""), memory=memory)
        elif odd == "an image":
            await agent.run(user_msg=ChatMessage(role=MessageRole.USER, blocks=[
                TextBlock(text=question), ImageBlock(image=PNG, image_mimetype="image/png")]), memory=memory)
        else:
            await agent.run(user_msg=question, memory=memory)

    asyncio.run(run())
    assert len(script.received) >= 13
    for request in script.received:
        assert_valid_structure(request)
        assert _holds_task(request), [(m.role, (m.content or "")[:40]) for m in request]
        assert _tokens(memory, request) <= int(0.95 * _budget(odd))
    assert llm.renders > 0


def test_a_function_agent_with_the_default_memory_keeps_its_task() -> None:
    script = ScriptedLLM(plan=["On it."] + [record_text(i, words=200) for i in range(12)])
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-task-agent-default", embedder=HashingEmbedder())
    agent = FunctionAgent(tools=TOOLS, llm=script.llm(), system_prompt=SYSTEM)

    async def run() -> None:
        await agent.run(user_msg=TASK, memory=memory)
        for i in range(12):
            await agent.run(user_msg=f"What does record {i} say?", memory=memory)

    asyncio.run(run())
    assert all(_holds_task(request) for request in script.received)
    assert not memory.last_render.passthrough
