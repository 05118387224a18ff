"""Message conversion between LlamaIndex ``ChatMessage`` and ``flexamem_core.Message``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from flexamem_llamaindex import from_core, to_core, to_core_list, tool_calls_of
from hypothesis import given, settings
from hypothesis import strategies as st
from li_helpers import dump
from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.llms.llm import ToolSelection

from flexamem_core import Message


def test_tool_call_blocks_become_core_tool_calls():
    msg = ChatMessage(role="assistant", blocks=[
        TextBlock(text="checking"),
        ToolCallBlock(tool_call_id="c1", tool_name="read_record", tool_kwargs={"record_id": 3}),
        ToolCallBlock(tool_call_id="c2", tool_name="add", tool_kwargs='{"a": 1, "b": 2}'),
    ])
    core = to_core(msg, 0, "m0")
    assert core.role == "assistant" and core.text == "checking" and core.id == "m0"
    assert [(c.id, c.name) for c in core.tool_calls] == [("c1", "read_record"), ("c2", "add")]
    assert json.loads(core.tool_calls[0].arguments) == {"record_id": 3}
    assert core.tool_calls[1].arguments == '{"a": 1, "b": 2}'


@pytest.mark.parametrize("entry", [
    {"id": "c9", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}},
    ToolSelection(tool_id="c9", tool_name="add", tool_kwargs={"a": 1}),
    SimpleNamespace(id="c9", function=SimpleNamespace(name="add", arguments='{"a": 1}')),
    {"id": "c9", "name": "add", "input": {"a": 1}},
])
def test_tool_calls_in_additional_kwargs(entry):
    msg = ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [entry]})
    (call,) = tool_calls_of(msg)
    assert (call.id, call.name, json.loads(call.arguments)) == ("c9", "add", {"a": 1})


def test_same_call_in_blocks_and_kwargs_is_counted_once():
    msg = ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="add")],
                      additional_kwargs={"tool_calls": [ToolSelection(tool_id="c1", tool_name="add",
                                                                      tool_kwargs={})]})
    assert len(tool_calls_of(msg)) == 1


def test_tool_result_keeps_its_call_id_and_roles_fold():
    result = to_core(ChatMessage(role="tool", content="3", additional_kwargs={"tool_call_id": "c1",
                                                                             "name": "add"}))
    assert (result.role, result.tool_call_id, result.name, result.text) == ("tool", "c1", "add", "3")
    assert to_core(ChatMessage(role=MessageRole.DEVELOPER, content="x")).role == "system"
    assert to_core(ChatMessage(role=MessageRole.CHATBOT, content="x")).role == "assistant"
    assert to_core(ChatMessage(role=MessageRole.FUNCTION, content="x")).role == "tool"


def test_media_blocks_show_as_marks_and_thinking_is_not_content():
    msg = ChatMessage(role="user", blocks=[TextBlock(text="look"), ImageBlock(url="http://x/y.png"),
                                           ThinkingBlock(content="hidden")])
    core = to_core(msg)
    assert core.text == "look\n[image]"
    assert "hidden" not in core.text


def test_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="ChatMessage"):
        to_core({"role": "user", "content": "hi"})  # type: ignore[arg-type]


def test_from_core_copies_originals_and_builds_new_messages():
    originals = [ChatMessage(role="user", content="hello")]
    back = from_core(to_core_list(originals)[0], originals)
    assert back == originals[0] and back is not originals[0]
    back.blocks[0].text = "changed"  # type: ignore[union-attr]
    assert originals[0].content == "hello"
    memory = from_core(Message(role="user", content="<memory>\nT</memory>"), originals)
    assert memory.role == MessageRole.USER and memory.content.startswith("<memory>")


def test_a_message_the_core_changed_maps_back_to_what_the_core_sends():
    """A cut, cleaned or re-paired copy must not map back to the host's original text."""
    from dataclasses import replace

    originals = [ChatMessage(role="user", content="log \x00\x1b[31m" + "x " * 50),
                 ChatMessage(role="tool", content="result", additional_kwargs={"tool_call_id": None}),
                 ChatMessage(role="system", content="inner note")]
    core = to_core_list(originals)
    cleaned = replace(core[0], content="log [31m" + "x " * 50)
    assert from_core(cleaned, originals).content == cleaned.content
    paired = replace(core[1], tool_call_id="flexamem_call_0_0")
    assert from_core(paired, originals).additional_kwargs["tool_call_id"] == "flexamem_call_0_0"
    marked = replace(core[2], role="user", content="[system] inner note")
    back = from_core(marked, originals)
    assert back.role == MessageRole.USER and back.content == "[system] inner note"
    assert originals[0].content.startswith("log \x00") and originals[2].role == MessageRole.SYSTEM


_roles = st.sampled_from(["user", "assistant", "tool", "system"])
_text = st.text(min_size=0, max_size=40)


@st.composite
def chat_messages(draw):
    role = draw(_roles)
    kwargs = {}
    blocks = [TextBlock(text=draw(_text))]
    if role == "assistant" and draw(st.booleans()):
        blocks.append(ToolCallBlock(tool_call_id=draw(st.text(min_size=1, max_size=6)), tool_name="t",
                                    tool_kwargs={"x": draw(st.integers())}))
    if role == "tool":
        kwargs["tool_call_id"] = draw(st.text(min_size=1, max_size=6))
    return ChatMessage(role=role, blocks=blocks, additional_kwargs=kwargs)


@settings(max_examples=60, deadline=None)
@given(st.lists(chat_messages(), max_size=12))
def test_conversion_never_mutates_and_round_trips(messages):
    before = dump(messages)
    core = to_core_list(messages)
    assert dump(messages) == before
    assert [m.id for m in core] == [f"m{i}" for i in range(len(messages))]
    back = [from_core(m, messages) for m in core]
    assert dump(back) == before
    assert all(a is not b for a, b in zip(back, messages))
