"""The one place where LlamaIndex ``ChatMessage`` and ``flexamem_core.Message`` meet.

LlamaIndex keeps tool calls in two places depending on the LLM integration: as
``ToolCallBlock`` content blocks (llama-index-core >= 0.14, the mock LLMs, Anthropic,
newer OpenAI) or in ``additional_kwargs["tool_calls"]`` (older OpenAI-style integrations:
OpenAI SDK objects, plain dicts, or ``ToolSelection``). Tool results are role ``tool``
with ``additional_kwargs["tool_call_id"]``. Both directions read the host message and
never write to it: messages that come back unchanged are deep copies of the originals
(agents edit returned messages in place), and only the memory message is new. It carries
no mark: a ``ChatMessage`` has no field that is not sent (OpenAI-style integrations send
``additional_kwargs`` with the message), so the memory is read from ``last_render``.
:class:`LlamaIndexCodec` is this module as the core's :class:`~flexamem_core.host.HostCodec`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)

from flexamem_core import Message, ToolCall
from flexamem_core.host.incremental import read_attrs

#: LlamaIndex roles folded onto the four roles of the core.
ROLE_TO_CORE: dict[str, str] = {
    MessageRole.SYSTEM.value: "system",
    MessageRole.DEVELOPER.value: "system",
    MessageRole.USER.value: "user",
    MessageRole.ASSISTANT.value: "assistant",
    MessageRole.CHATBOT.value: "assistant",
    MessageRole.MODEL.value: "assistant",
    MessageRole.TOOL.value: "tool",
    MessageRole.FUNCTION.value: "tool",
}

#: Key a core message keeps its position under, so a rendered message maps back to its host copy.
SOURCE_KEY = "llamaindex_index"


def _arguments_json(args: Any) -> str:
    if isinstance(args, str):
        return args
    return json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)


def _call_from_kwargs_entry(entry: Any) -> ToolCall:
    """One entry of ``additional_kwargs["tool_calls"]``: dict, OpenAI SDK object or ToolSelection."""
    if isinstance(entry, Mapping):
        if "tool_name" in entry:  # ToolSelection dumped to a dict
            return ToolCall(name=str(entry["tool_name"]), arguments=_arguments_json(entry.get("tool_kwargs", {})),
                            id=entry.get("tool_id") or None)
        if "input" in entry and "name" in entry:  # Anthropic-style tool_use
            return ToolCall(name=str(entry["name"]), arguments=_arguments_json(entry["input"]),
                            id=entry.get("id") or None)
        return ToolCall.from_any(entry)
    if hasattr(entry, "tool_name"):  # ToolSelection
        return ToolCall(name=str(entry.tool_name), arguments=_arguments_json(getattr(entry, "tool_kwargs", {})),
                        id=getattr(entry, "tool_id", None) or None)
    function = getattr(entry, "function", None)
    if function is not None:  # OpenAI SDK ChatCompletionMessageToolCall
        return ToolCall(name=str(getattr(function, "name", "") or "unknown_tool"),
                        arguments=_arguments_json(getattr(function, "arguments", "") or ""),
                        id=getattr(entry, "id", None) or None)
    if hasattr(entry, "model_dump"):
        return ToolCall.from_any(entry.model_dump())
    raise TypeError(f"cannot read tool call of type {type(entry).__name__}")


def tool_calls_of(message: ChatMessage) -> tuple[ToolCall, ...]:
    """Every tool call of an assistant message, from blocks and from ``additional_kwargs``."""
    calls: list[ToolCall] = [
        ToolCall(name=b.tool_name, arguments=_arguments_json(b.tool_kwargs), id=b.tool_call_id or None)
        for b in message.blocks if isinstance(b, ToolCallBlock)
    ]
    seen = {c.id for c in calls if c.id}
    for entry in message.additional_kwargs.get("tool_calls") or ():
        call = _call_from_kwargs_entry(entry)
        if call.id is None or call.id not in seen:
            calls.append(call)
            if call.id:
                seen.add(call.id)
    return tuple(calls)


def _content(message: ChatMessage) -> str | tuple[dict[str, Any], ...]:
    """Text blocks as one string; with other media, parts whose non-text kinds show as marks."""
    shown = [b for b in message.blocks if not isinstance(b, (ToolCallBlock, ThinkingBlock))]
    if all(isinstance(b, TextBlock) for b in shown):
        return "\n".join(b.text for b in shown)  # type: ignore[union-attr]
    parts: list[dict[str, Any]] = []
    for b in shown:
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "text": b.text})
        else:
            parts.append({"type": str(getattr(b, "block_type", "unknown"))})
    return tuple(parts)


def to_core(message: ChatMessage, index: int | None = None, message_id: str | None = None) -> Message:
    """A core :class:`Message` for a LlamaIndex message (read only, never mutated).

    ``index`` is the message's position in the list of originals, kept in the metadata so
    the rendered window maps back to a copy of the original; ``message_id`` is the id
    ingestion is keyed by (LlamaIndex messages have none of their own).
    """
    if not isinstance(message, ChatMessage):
        raise TypeError(f"expected a llama_index ChatMessage, got {type(message).__name__}")
    role_value = message.role.value if isinstance(message.role, MessageRole) else str(message.role)
    role = ROLE_TO_CORE.get(role_value)
    if role is None:
        raise ValueError(f"unsupported LlamaIndex message role {role_value!r}")
    kwargs = message.additional_kwargs
    tool_call_id = kwargs.get("tool_call_id") if role == "tool" else None
    name = kwargs.get("name") if isinstance(kwargs.get("name"), str) else None
    return Message(
        role=role,  # type: ignore[arg-type]
        content=_content(message),
        tool_calls=tool_calls_of(message) if role == "assistant" else (),
        tool_call_id=str(tool_call_id) if tool_call_id is not None else None,
        id=message_id,
        name=name,
        metadata={SOURCE_KEY: index} if index is not None else {},
    )


def to_core_list(messages: Sequence[ChatMessage]) -> list[Message]:
    """Convert a host list, each message keyed by its position (``m0``, ``m1``, ...)."""
    return [to_core(m, i, f"m{i}") for i, m in enumerate(messages)]


def from_core(message: Message, originals: Sequence[ChatMessage]) -> ChatMessage:
    """The LlamaIndex message for a rendered one: a deep copy of its original, or a new message."""
    index = message.metadata.get(SOURCE_KEY) if message.metadata else None
    if isinstance(index, int) and 0 <= index < len(originals):
        copy = originals[index].model_copy(deep=True)
        before = to_core(originals[index], index)
        if (before.role, before.content, before.tool_call_id) == (message.role, message.content,
                                                                   message.tool_call_id):
            return copy
        # The core changed it (cut to fit, control characters cleaned, a result re-paired or a
        # system turn marked): the copy says what the core sends, its tool calls kept.
        if message.role != before.role:
            copy.role = _ROLE_FROM_CORE[message.role]
        if message.content != before.content:
            copy.blocks = [TextBlock(text=message.text),
                           *(b for b in copy.blocks if isinstance(b, ToolCallBlock))]
        if message.tool_call_id != before.tool_call_id:
            copy.additional_kwargs["tool_call_id"] = message.tool_call_id
        return copy
    role = MessageRole.SYSTEM if message.role == "system" else (
        MessageRole.ASSISTANT if message.role == "assistant" else MessageRole.USER)
    if message.role == "tool":  # the core only creates user/system messages; be safe anyway
        role = MessageRole.TOOL
    return ChatMessage(role=role, content=message.text)


_ROLE_FROM_CORE = {"system": MessageRole.SYSTEM, "user": MessageRole.USER, "assistant": MessageRole.ASSISTANT,
                   "tool": MessageRole.TOOL}


def from_core_list(messages: Sequence[Message], originals: Sequence[ChatMessage]) -> list[ChatMessage]:
    return [from_core(m, originals) for m in messages]


def copy_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Deep copies, so the host can edit what it gets without touching what is stored."""
    return [m.model_copy(deep=True) for m in messages]


@dataclass(frozen=True)
class ChatConverted:
    """Core messages and the host messages they map back to (by position)."""

    messages: list[Message]
    originals: list[ChatMessage]


def core_history(prefix: Sequence[ChatMessage], log: Sequence[ChatMessage],
                 tail: Sequence[ChatMessage] = ()) -> ChatConverted:
    """Core messages for ``prefix + log + tail`` and the originals they map back to.

    Log and tail messages are numbered as positions of the chat log (``m0``, ``m1``, ...;
    the tail continues the log, where the agent will put it when the run finishes), so the
    memory and the LLM wrapper key ingestion the same way; prefix messages (an agent's
    system prompt) get ``p0``, ``p1``, ...
    """
    originals = [*prefix, *log, *tail]
    core = [to_core(m, i, f"p{i}") for i, m in enumerate(prefix)]
    core += [to_core(m, len(prefix) + j, f"m{j}") for j, m in enumerate([*log, *tail])]
    return ChatConverted(core, originals)


class LlamaIndexCodec:
    """LlamaIndex messages <-> core messages; the first ``prefix`` messages are the agent's own."""

    def __init__(self, prefix: int = 0) -> None:
        self.prefix = prefix

    #: What an edit in place replaces (incremental conversion, :mod:`flexamem_core.host.incremental`).
    edit_keys = (read_attrs("blocks"), read_attrs("role"))

    @property
    def memo_key(self) -> int:
        return self.prefix

    @property
    def memo_from(self) -> int:
        """The agent's own messages (its system prompt) are new objects on every call."""
        return self.prefix

    def to_core(self, messages: Sequence[ChatMessage]) -> ChatConverted:
        return core_history(messages[:self.prefix], messages[self.prefix:])

    def extend(self, converted: ChatConverted, messages: Sequence[ChatMessage], start: int) -> ChatConverted:
        """``converted`` (of ``messages[:start]``) extended by the rest, in place."""
        if start < self.prefix or len(converted.messages) != start:
            return self.to_core(messages)
        prefix = messages[:self.prefix]
        converted.messages[:self.prefix] = [to_core(m, i, f"p{i}") for i, m in enumerate(prefix)]
        converted.originals[:self.prefix] = prefix
        tail = list(messages[start:])
        converted.messages.extend(to_core(m, i, f"m{i - self.prefix}") for i, m in enumerate(tail, start))
        converted.originals.extend(tail)
        return converted

    def to_host(self, rendered: Sequence[Message], converted: ChatConverted) -> list[ChatMessage]:
        return from_core_list(rendered, converted.originals)

    def tool_schema(self, tool: Any) -> dict[str, Any]:
        """The OpenAI function schema LlamaIndex's function-calling LLMs send for a tool."""
        return tool.metadata.to_openai_tool(skip_length_check=True)
