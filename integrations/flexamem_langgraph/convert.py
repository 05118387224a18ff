"""The one place where LangChain messages become FlexA-Mem messages and back.

Going in, every LangChain message is read (never mutated) into a frozen
:class:`flexamem_core.Message` that keeps the LangChain id, the tool calls with JSON
arguments as langchain-openai sends them (invalid tool calls too, since ``create_agent``
answers them with a ``ToolMessage``), the ``tool_call_id``, the name and the content
blocks. Coming back, the window messages are the caller's ORIGINAL objects (so ids,
metadata and provider fields such as reasoning blocks survive untouched) and only the
memory message is new, marked in its ``response_metadata`` (never sent to a provider).
:data:`CODEC` is this module as the core's :class:`~flexamem_core.host.HostCodec`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from flexamem_core import FlexAMem, Message, MessageError, ToolCall
from flexamem_core.host import MEMORY_ID, is_marked, mark
from flexamem_core.host.incremental import read_attrs
from flexamem_core.request.counting import message_tokens

#: Id of the rendered memory message (the core's); it never enters the graph state.
MEMORY_MESSAGE_ID = MEMORY_ID

_CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "human": "user",
               "assistant": "assistant", "ai": "assistant", "tool": "tool"}


@dataclass(frozen=True)
class Converted:
    """Core messages plus the map back to the LangChain objects they were read from."""

    messages: list[Message]
    originals: dict[int, BaseMessage]

    def original(self, message: Message) -> BaseMessage | None:
        """The LangChain object a core message was read from (by identity), if any."""
        return self.originals.get(id(message))


def _json_args(args: Any) -> str:
    if isinstance(args, str):
        return args
    if args is None:
        return ""
    return json.dumps(args, ensure_ascii=False, default=str)


def _content(content: Any) -> str | tuple[dict[str, Any], ...]:
    """String content as is; content blocks as dict parts (bare strings become text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts: list[dict[str, Any]] = []
        for block in content:
            if isinstance(block, str):
                parts.append({"type": "text", "text": block})
            elif isinstance(block, Mapping):
                parts.append(dict(block))
            else:
                parts.append({"type": "text", "text": str(block)})
        return tuple(parts)
    return str(content)


def _tool_calls(message: AIMessage) -> tuple[ToolCall, ...]:
    calls = [ToolCall(name=str(c.get("name") or "unknown_tool"), arguments=_json_args(c.get("args")),
                      id=c.get("id") or None) for c in message.tool_calls]
    calls += [ToolCall(name=str(c.get("name") or "unknown_tool"), arguments=_json_args(c.get("args")),
                       id=c.get("id") or None) for c in message.invalid_tool_calls]
    return tuple(calls)


def _role(message: BaseMessage) -> str:
    if isinstance(message, RemoveMessage):
        raise MessageError("RemoveMessage is an instruction to the add_messages reducer, not a message; "
                           "render the reduced state['messages'] instead")
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        role = _CHAT_ROLES.get(str(message.role).lower())
        if role is None:
            raise MessageError(f"ChatMessage role {message.role!r} is not supported; "
                               f"use one of {sorted(_CHAT_ROLES)}")
        return role
    raise MessageError(f"{type(message).__name__} (type {message.type!r}) is not supported; use "
                       "SystemMessage, HumanMessage, AIMessage or ToolMessage")


def to_core_message(message: BaseMessage) -> Message:
    """Read one LangChain message into a core :class:`Message` (the LangChain id is kept)."""
    if not isinstance(message, BaseMessage):
        raise MessageError(f"expected a LangChain BaseMessage, got {type(message).__name__}")
    role = _role(message)
    return Message(
        role=role,  # type: ignore[arg-type]
        content=_content(message.content),
        tool_calls=_tool_calls(message) if isinstance(message, AIMessage) else (),
        tool_call_id=message.tool_call_id if isinstance(message, ToolMessage) else None,
        id=message.id or None,
        name=message.name or None,
    )


def to_core(messages: Sequence[BaseMessage]) -> Converted:
    """Read a LangChain history into core messages, remembering each original object."""
    if isinstance(messages, (str, bytes, BaseMessage)):
        raise MessageError("expected a sequence of LangChain messages")
    return extend(Converted([], {}), messages, 0)


def extend(converted: Converted, messages: Sequence[BaseMessage], start: int) -> Converted:
    """``converted`` (of ``messages[:start]``) extended by the rest, in place (all or nothing:
    a message it cannot read raises before anything is added)."""
    core: list[Message] = []
    for i in range(start, len(messages)):
        try:
            core.append(to_core_message(messages[i]))
        except MessageError as exc:
            raise MessageError(f"message {i}: {exc}") from None
    for m, lc in zip(core, messages[start:]):
        converted.originals[id(m)] = lc
    converted.messages.extend(core)
    return converted


def is_memory_message(message: BaseMessage | Message) -> bool:
    """True for the rendered memory message (LangChain or core form), by the core's mark."""
    return is_marked(message.metadata if isinstance(message, Message) else message.response_metadata)


def from_core_message(message: Message) -> BaseMessage:
    """A new LangChain message for a core message that has no original (memory, or made by the core)."""
    content: Any = message.content if isinstance(message.content, str) else [dict(p) for p in message.content]
    if is_memory_message(message):
        return HumanMessage(content=message.text, id=MEMORY_MESSAGE_ID, response_metadata=mark())
    if message.role == "system":
        return SystemMessage(content=content, id=message.id)
    if message.role == "user":
        return HumanMessage(content=content, id=message.id, name=message.name)
    if message.role == "tool":
        return ToolMessage(content=content, tool_call_id=message.tool_call_id or "", id=message.id,
                           name=message.name)
    calls = []
    for c in message.tool_calls:
        try:
            args = json.loads(c.arguments) if c.arguments else {}
        except json.JSONDecodeError:
            args = {"input": c.arguments}
        calls.append({"name": c.name, "args": args if isinstance(args, dict) else {"input": args},
                      "id": c.id, "type": "tool_call"})
    return AIMessage(content=content, tool_calls=calls, id=message.id, name=message.name)


def to_langchain(rendered: Sequence[Message], converted: Converted) -> list[BaseMessage]:
    """Map rendered core messages back: originals for the window, new messages otherwise."""
    by_id: dict[str, BaseMessage] | None = None  # made only when a rendered message is a copy
    out: list[BaseMessage] = []
    for m in rendered:
        original = converted.original(m)
        if original is None and m.id and not is_memory_message(m):
            if by_id is None:
                by_id = {c.id: converted.originals[id(c)] for c in converted.messages if c.id}
            candidate = by_id.get(m.id)
            # Only reuse by id when the core returned the same message (not a shortened copy).
            if candidate is not None and to_core_message(candidate) == m:
                original = candidate
        out.append(original if original is not None else from_core_message(m))
    return out


def as_system_message(system_prompt: str | BaseMessage | None) -> SystemMessage | None:
    """Normalise a system prompt given as text or message (``None`` stays ``None``)."""
    if system_prompt is None or system_prompt == "":
        return None
    if isinstance(system_prompt, SystemMessage):
        return system_prompt
    if isinstance(system_prompt, str):
        return SystemMessage(content=system_prompt)
    if isinstance(system_prompt, BaseMessage):
        return SystemMessage(content=system_prompt.content)
    raise TypeError(f"system_prompt must be str or SystemMessage, got {type(system_prompt).__name__}")


def system_tokens(mem: FlexAMem, system_prompt: str | BaseMessage | None) -> int:
    """Tokens of a system prompt the model node sends apart from the history (0 for none)."""
    system = as_system_message(system_prompt)
    return message_tokens(to_core_message(system), mem.tokenizer) if system is not None else 0


def tool_schema(tool: Any) -> dict[str, Any]:
    """The schema ``bind_tools`` sends for most providers (OpenAI function JSON); a dict as given."""
    return dict(tool) if isinstance(tool, Mapping) else convert_to_openai_tool(tool)


class LangChainCodec:
    """LangChain messages <-> core messages, for :func:`flexamem_core.host.render_host`."""

    #: What an edit in place replaces (incremental conversion, :mod:`flexamem_core.host.incremental`).
    edit_keys = (read_attrs("content"), read_attrs("id"))
    memo_key = None
    memo_from = 0

    def to_core(self, messages: Sequence[BaseMessage]) -> Converted:
        return to_core(messages)

    def extend(self, converted: Converted, messages: Sequence[BaseMessage], start: int) -> Converted:
        return extend(converted, messages, start)

    def to_host(self, rendered: Sequence[Message], converted: Converted) -> list[BaseMessage]:
        return to_langchain(rendered, converted)

    def tool_schema(self, tool: Any) -> dict[str, Any]:
        return tool_schema(tool)


CODEC = LangChainCodec()
