"""LangChain <-> FlexA-Mem message conversion: ids, tool calls, content blocks, no mutation."""

from __future__ import annotations

import json

import pytest
from flexamem_langgraph import MEMORY_MESSAGE_ID, is_memory_message, to_core, to_core_message, to_langchain
from flexamem_langgraph.convert import from_core_message
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from flexamem_core import Message, MessageError


def test_roles_ids_tool_calls_and_results_are_kept() -> None:
    ai = AIMessage(content="two reads", id="ai-1", tool_calls=[
        {"name": "read_file", "args": {"path": "a.py", "lines": [1, 2]}, "id": "c1"},
        {"name": "read_file", "args": {"path": "ü.py"}, "id": "c2"},
    ])
    history = [SystemMessage("sys", id="s"), HumanMessage("task", id="h"), ai,
               ToolMessage("A", tool_call_id="c1", id="t1"), ToolMessage("B", tool_call_id="c2", id="t2")]
    core = to_core(history).messages
    assert [m.role for m in core] == ["system", "user", "assistant", "tool", "tool"]
    assert [m.id for m in core] == ["s", "h", "ai-1", "t1", "t2"]
    assert [(c.name, json.loads(c.arguments), c.id) for c in core[2].tool_calls] == [
        ("read_file", {"path": "a.py", "lines": [1, 2]}, "c1"), ("read_file", {"path": "ü.py"}, "c2")]
    assert [m.tool_call_id for m in core[3:]] == ["c1", "c2"]


def test_invalid_tool_calls_become_calls_so_their_error_results_are_not_orphans() -> None:
    ai = AIMessage(content="", id="a", invalid_tool_calls=[
        {"name": "read_file", "args": "{not json", "id": "bad1", "error": "parse",
         "type": "invalid_tool_call"}])
    call = to_core_message(ai).tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("read_file", "{not json", "bad1")


def test_content_blocks_are_parts_and_text_is_readable() -> None:
    msg = HumanMessage(content=["plain", {"type": "text", "text": "block"},
                                {"type": "image_url", "image_url": {"url": "data:x"}}], id="h")
    core = to_core_message(msg)
    assert isinstance(core.content, tuple) and len(core.content) == 3
    assert core.content[0] == {"type": "text", "text": "plain"}
    assert "plain" in core.text and "block" in core.text and "[image]" in core.text


def test_chat_message_roles_map_and_unknown_types_fail_clearly() -> None:
    assert to_core_message(ChatMessage(content="x", role="developer")).role == "system"
    with pytest.raises(MessageError, match="ChatMessage role"):
        to_core_message(ChatMessage(content="x", role="narrator"))
    with pytest.raises(MessageError, match="FunctionMessage"):
        to_core([HumanMessage("a"), FunctionMessage(content="x", name="f")])
    with pytest.raises(MessageError, match="RemoveMessage"):
        to_core([RemoveMessage(id="x")])
    with pytest.raises(MessageError, match="message 1"):
        to_core([HumanMessage("a"), {"role": "user", "content": "dict"}])  # type: ignore[list-item]


def test_back_conversion_returns_originals_and_a_new_memory_message() -> None:
    history = [HumanMessage("task", id="h"), AIMessage("done", id="a")]
    converted = to_core(history)
    memory = Message(role="user", content="<memory>\nT\n</memory>", metadata={"flexamem": "memory"})
    back = to_langchain([converted.messages[0], memory, converted.messages[1]], converted)
    assert back[0] is history[0] and back[2] is history[1]
    assert isinstance(back[1], HumanMessage) and back[1].id == MEMORY_MESSAGE_ID
    assert is_memory_message(back[1]) and not is_memory_message(history[0])


def test_core_made_messages_convert_to_langchain_types() -> None:
    ai = from_core_message(Message.from_dict({"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]}))
    assert isinstance(ai, AIMessage) and ai.tool_calls[0]["args"] == {"x": 1}
    tool = from_core_message(Message(role="tool", content="r", tool_call_id="c"))
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "c"


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
_args = st.dictionaries(st.text(min_size=1, max_size=8), st.one_of(st.integers(), _text, st.booleans()),
                        max_size=3)


@st.composite
def lc_messages(draw: st.DrawFn) -> list:
    out: list = []
    for i in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["human", "ai", "tool", "system", "blocks"]))
        mid = draw(st.one_of(st.none(), st.just(f"m{i}")))
        if kind == "human":
            out.append(HumanMessage(draw(_text), id=mid))
        elif kind == "system":
            out.append(SystemMessage(draw(_text), id=mid))
        elif kind == "blocks":
            out.append(AIMessage(content=[{"type": "text", "text": draw(_text)}, draw(_text)], id=mid))
        elif kind == "tool":
            out.append(ToolMessage(draw(_text), tool_call_id=f"c{i}", id=mid))
        else:
            calls = [{"name": draw(st.sampled_from(["f", "g"])), "args": draw(_args), "id": f"c{i}-{k}"}
                     for k in range(draw(st.integers(0, 3)))]
            out.append(AIMessage(content=draw(_text), tool_calls=calls, id=mid))
    return out


@settings(max_examples=150, deadline=None)
@given(lc_messages())
def test_property_conversion_never_mutates_and_round_trips_originals(history: list) -> None:
    before = json.dumps([m.model_dump() for m in history], sort_keys=True, default=str)
    converted = to_core(history)
    assert [m.id for m in converted.messages] == [m.id for m in history]
    back = to_langchain(list(converted.messages), converted)
    assert all(a is b for a, b in zip(back, history, strict=True)) and len(back) == len(history)
    assert json.dumps([m.model_dump() for m in history], sort_keys=True, default=str) == before
    for lc, core in zip(history, converted.messages, strict=True):
        if isinstance(lc, AIMessage):
            assert [json.loads(c.arguments) for c in core.tool_calls] == [c["args"] for c in lc.tool_calls]
        again = to_core_message(lc.model_copy(deep=True))
        assert again == core and again.fingerprint() == core.fingerprint()
