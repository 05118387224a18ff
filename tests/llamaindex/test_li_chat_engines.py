"""``SimpleChatEngine`` and ``CondensePlusContextChatEngine`` with ``memory=FlexAMemory(...)``."""

from __future__ import annotations

import asyncio
import time

from flexamem_llamaindex import FlexAMemory, to_core_list
from li_helpers import ScriptedLLM, assert_valid_structure, memory_messages, read_record, record_text
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import MessageRole
from llama_index.core.chat_engine import CondensePlusContextChatEngine, SimpleChatEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

BUDGET = 2000
SYSTEM = "You are a friendly records clerk."
VAULT = "What was the vault access code you told me at the start?"


def replies() -> list[str]:
    return [read_record(7)] + [record_text(i) for i in range(10, 29)] + ["It was QUOKKA-4417."]


def test_simple_chat_engine_sync_async_and_stream():
    script = ScriptedLLM(plan=replies())
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-simple")
    engine = SimpleChatEngine.from_defaults(llm=script.llm(is_chat_model=True), memory=memory,
                                            system_prompt=SYSTEM)
    engine.chat("What does record 7 say?")
    for i in range(10, 20):
        engine.chat(f"What does record {i} say?")

    async def more() -> str:
        for i in range(20, 29):
            await engine.achat(f"What does record {i} say?")
        return str(await engine.achat(VAULT))

    assert asyncio.run(more()) == "It was QUOKKA-4417."
    stream = engine.stream_chat("And record 29?")
    assert "".join(stream.response_gen) == "Done."
    deadline = time.monotonic() + 10
    while len(memory.get_all()) < 2 * len(script.received) and time.monotonic() < deadline:
        time.sleep(0.05)  # the engine writes the streamed reply from its own thread

    for received in script.received:
        assert_valid_structure(received)
        assert received[0].content == SYSTEM and received[-1].role == MessageRole.USER
        assert memory.engine.count_messages(to_core_list(received)) <= BUDGET
    vault_call = script.received[-2]
    assert vault_call[-1].content == VAULT
    assert "QUOKKA-4417" in memory_messages(vault_call)[0].content
    assert len(memory.get_all()) == 2 * len(script.received)
    assert engine.chat_history[-1].role == MessageRole.ASSISTANT


class FixedRetriever(BaseRetriever):
    """A retriever over two fixed notes (no embedding model needed)."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text="Records are kept for seven years."), score=1.0),
                NodeWithScore(node=TextNode(text="Vault codes rotate every quarter."), score=0.5)]


def test_condense_plus_context_chat_engine():
    script = ScriptedLLM(plan=replies())
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-condense")
    engine = CondensePlusContextChatEngine.from_defaults(
        retriever=FixedRetriever(), llm=script.llm(is_chat_model=True), memory=memory, system_prompt=SYSTEM)
    engine.chat("What does record 7 say?")
    for i in range(10, 28):
        engine.chat(f"What does record {i} say?")
    asyncio.run(engine.achat(VAULT))

    last = script.received[-1]
    assert_valid_structure(last)
    assert last[-1].content == VAULT  # the synthesizer's question
    assert "Vault codes rotate" in last[0].content  # retrieved context in the system prompt
    (mem_msg,) = memory_messages(last)
    assert "QUOKKA-4417" in mem_msg.content
    assert not memory.last_render.passthrough
    assert len(memory.get_all()) == 40
