"""A user message larger than the budget through LlamaIndex: cut with the mark, first or third.

A ``FunctionAgent`` (``agent_memory``: the memory and the wrapped LLM) and a
``SimpleChatEngine`` get a 43k-token message as their first and as their third message;
each time the LLM receives it cut in the middle with the visible mark, head and tail kept,
within the budget, and the chat log keeps it whole.
"""

from __future__ import annotations

import asyncio

import pytest
from flexamem_llamaindex import FlexAMemory, agent_memory, to_core_list
from li_helpers import Call, ScriptedLLM, add, assert_valid_structure, read_record
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.tools import FunctionTool

from flexamem_core.index.embeddings import HashingEmbedder
from tests.oversized import is_cut, long_text

BUDGET = 4000
SYSTEM = "You are an auditor."
TOOLS = [FunctionTool.from_defaults(read_record), FunctionTool.from_defaults(add)]


def _check(script: ScriptedLLM, memory: FlexAMemory, big: str) -> None:
    for received in script.received:
        assert_valid_structure(received)
        assert memory.engine.count_messages(to_core_list(received)) <= int(0.95 * BUDGET)
        assert all(m.content != big for m in received)
    assert any(is_cut(m.content or "") for m in script.received[-1])
    assert any(m.content == big for m in memory.get_all())  # the log keeps it whole


@pytest.mark.parametrize("position", ["first", "third"])
def test_function_agent(position: str) -> None:
    big = long_text()
    script = ScriptedLLM(plan=["Hi."] if position == "third" else [])
    script.plan += [[Call("read_record", {"record_id": 7})], "Done."]
    # the hashing embedder: MiniLM would embed every piece of the 43k-token unit (about a minute on CPU)
    memory, llm = agent_memory(script.llm(), namespace=f"li-huge-{position}", budget=BUDGET,
                               embedder=HashingEmbedder())
    agent = FunctionAgent(tools=TOOLS, llm=llm, system_prompt=SYSTEM)

    async def run() -> None:
        if position == "third":
            await agent.run(user_msg="Hello.", memory=memory)
        await agent.run(user_msg=big, memory=memory)

    asyncio.run(run())
    _check(script, memory, big)


@pytest.mark.parametrize("position", ["first", "third"])
def test_chat_engine(position: str) -> None:
    big = long_text()
    script = ScriptedLLM(plan=["Hi.", "Noted."])
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace=f"li-chat-huge-{position}", embedder=HashingEmbedder())
    engine = SimpleChatEngine.from_defaults(llm=script.llm(is_chat_model=True), memory=memory, system_prompt=SYSTEM)
    if position == "third":
        engine.chat("Hello.")
    engine.chat(big)
    assert memory.last_render.report["task_cut_messages"] == 1
    _check(script, memory, big)


def test_a_system_prompt_too_large_is_the_one_clear_error() -> None:
    script = ScriptedLLM(plan=["Hi."])
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-huge-system")
    engine = SimpleChatEngine.from_defaults(llm=script.llm(is_chat_model=True), memory=memory,
                                            system_prompt=long_text())
    with pytest.raises(ValueError, match=r"token limit|too small"):
        engine.chat("Hello.")
