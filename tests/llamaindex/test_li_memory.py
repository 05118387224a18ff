"""``FlexAMemory`` on its own: rendering, budget, copies, the async twins and the handle."""

from __future__ import annotations

import asyncio
import json

import pytest
from flexamem_llamaindex import FlexAMemory, to_core_list
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from li_helpers import assert_valid_structure, dump, memory_messages, read_record, record_text
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock

from flexamem_core import InMemoryStore
from flexamem_core.stores import NamespaceError, StoreURLError

BUDGET = 2000
VAULT_QUESTION = "What was the vault access code?"


def long_chat(turns: int = 20) -> list[ChatMessage]:
    """A conversation well over BUDGET whose first answer holds a detail asked about at the end."""
    messages = [ChatMessage(role="user", content="What does record 7 say?"),
                ChatMessage(role="assistant", content=read_record(7))]
    for i in range(10, 10 + turns):
        messages += [ChatMessage(role="user", content=f"What does record {i} say?"),
                     ChatMessage(role="assistant", content=record_text(i))]
    messages.append(ChatMessage(role="user", content=VAULT_QUESTION))
    return messages


def tokens(memory: FlexAMemory, messages: list[ChatMessage], extra: int = 0) -> int:
    return memory.engine.count_messages(to_core_list(messages), extra_tokens=extra)


def test_short_history_passes_through_as_copies():
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-short")
    original = [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="hello")]
    memory.put_messages(original)
    out = memory.get()
    assert dump(out) == dump(original) and memory.last_render.passthrough
    out[0].blocks[0].text = "edited by the host"  # type: ignore[union-attr]
    original[1].blocks[0].text = "edited too"  # type: ignore[union-attr]
    assert [m.content for m in memory.get_all()] == ["hi", "hello"]


def test_long_chat_renders_memory_with_recovered_detail_within_budget():
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-long")
    history = long_chat()
    before = dump(history)
    memory.set(history)
    out = memory.get(input=VAULT_QUESTION)
    assert dump(history) == before
    assert len(memory.get_all()) == len(history)  # the log stays complete
    (mem_msg,) = memory_messages(out)
    assert "QUOKKA-4417" in mem_msg.content  # the old detail, recovered for this query
    assert out[-1].content == VAULT_QUESTION  # the current turn is never dropped
    assert len(out) < len(history)
    assert tokens(memory, out) <= int(0.95 * BUDGET)
    assert_valid_structure(out)


def test_initial_token_count_reduces_the_budget_and_is_checked():
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-initial")
    memory.set(long_chat())
    full = memory.get()
    reduced = memory.get(initial_token_count=700)
    assert tokens(memory, reduced, 700) <= int(0.95 * BUDGET)
    assert tokens(memory, reduced) < tokens(memory, full)
    with pytest.raises(ValueError, match="exceeds token limit"):
        memory.get(initial_token_count=BUDGET)


def test_async_twins_match_the_sync_methods():
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-async")
    history = long_chat(12)

    async def scenario() -> tuple[list[ChatMessage], list[ChatMessage]]:
        await memory.aput_messages(history[:-1])
        await memory.aput(history[-1])
        return await memory.aget(input=VAULT_QUESTION), await memory.aget_all()

    rendered, everything = asyncio.run(scenario())
    assert dump(everything) == dump(history)
    assert dump(rendered) == dump(memory.get(input=VAULT_QUESTION))
    asyncio.run(memory.aset(history[:2]))
    assert len(memory.get_all()) == 2
    asyncio.run(memory.areset())
    assert memory.get_all() == [] and memory.get() == []


def test_set_and_reset():
    memory = FlexAMemory.from_defaults(chat_history=long_chat(3), budget=BUDGET, namespace="li-set")
    assert len(memory.get_all()) == 9
    memory.set([ChatMessage(role="user", content="fresh start")])
    assert [m.content for m in memory.get()] == ["fresh start"]
    memory.reset()
    assert memory.get_all() == []


def test_handle_round_trip_reopens_the_same_store_and_engine():
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-handle")
    memory.set(long_chat(12))
    first = memory.get(input=VAULT_QUESTION)
    data = json.loads(json.dumps(memory.to_dict()))
    assert data["store_url"].startswith("memory://") and data["namespace"] == "li-handle"
    restored = FlexAMemory.from_dict(data)
    assert restored.engine is memory.engine
    assert dump(restored.get_all()) == dump(memory.get_all())
    assert dump(restored.get(input=VAULT_QUESTION)) == dump(first)


def test_handle_of_a_store_from_another_process_rebuilds_from_the_log():
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-elsewhere")
    memory.set(long_chat())
    data = memory.to_dict()
    data["store_url"] = "memory://a-store-of-another-process"
    restored = FlexAMemory.from_dict(data)
    out = restored.get(input=VAULT_QUESTION)
    assert "QUOKKA-4417" in memory_messages(out)[0].content


def test_a_given_store_object_is_used_and_bad_input_is_rejected():
    store = InMemoryStore()
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-store", store=store)
    memory.set(long_chat(12))
    memory.get()
    assert "li-store" in store.namespaces()
    with pytest.raises(NamespaceError):
        FlexAMemory.from_defaults(namespace="bad namespace!")
    with pytest.raises(StoreURLError):
        FlexAMemory.from_defaults(store="no-scheme-here")
    with pytest.raises(ValueError, match="kind"):
        FlexAMemory.from_defaults(kind="novel")  # type: ignore[arg-type]


# -- message rules as properties -----------------------------------------------------------

@st.composite
def agent_histories(draw):
    """Tool-using histories (parallel calls included) long enough to need memory."""
    messages = [ChatMessage(role="user", content="Audit the records.")]
    n_steps = draw(st.integers(4, 14))
    call = 0
    for step in range(n_steps):
        width = draw(st.integers(0, 3))
        if width == 0:
            messages.append(ChatMessage(role="assistant", content=f"Note {step}: " + record_text(step, 40)))
            if draw(st.booleans()):
                messages.append(ChatMessage(role="user", content=f"Continue with step {step + 1}."))
            continue
        ids = [f"c{call + k}" for k in range(width)]
        call += width
        messages.append(ChatMessage(role="assistant", blocks=[
            ToolCallBlock(tool_call_id=i, tool_name="read_record", tool_kwargs={"record_id": step})
            for i in ids]))
        for i in ids:
            words = draw(st.integers(20, 160))
            messages.append(ChatMessage(role="tool", content=record_text(step * 10 + int(i[1:]), words),
                                        additional_kwargs={"tool_call_id": i}))
    return messages


@pytest.mark.parametrize("kind", ["agent", "chat"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=agent_histories())
def test_rendered_messages_obey_the_message_rules(kind, history):
    if kind == "chat":  # a chat memory is read at a user turn; its current turn must fit
        history = [*history, ChatMessage(role="user", content="And what next?")]
    memory = FlexAMemory.from_defaults(budget=1200, namespace=f"li-prop-{kind}", kind=kind)
    memory.set(history)
    before = dump(history)
    out = memory.get()
    assert dump(history) == before
    assert_valid_structure(out)
    assert out[-1] == history[-1]  # the newest message is always there, unchanged
    assert tokens(memory, out) <= int(0.95 * 1200)
    assert dump(memory.get_all()) == before
    stored = {id(m) for m in memory.chat_store.get_messages(memory.chat_store_key)}
    assert not any(id(m) in stored for m in out)  # copies, never the stored objects
    assert sum(m.role == MessageRole.SYSTEM for m in out) == 0
