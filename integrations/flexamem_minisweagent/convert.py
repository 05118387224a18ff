"""mini-swe-agent message dicts <-> FlexA-Mem :class:`Message`, in every format it writes.

mini-swe-agent keeps one linear list of plain dicts and only ever appends to it, in one
of three shapes depending on the model class:

* chat completions with tool calls (v2 default: ``litellm``): ``assistant`` messages with
  ``tool_calls`` answered by ``tool`` messages carrying ``tool_call_id``;
* text actions (``litellm_textbased``, ``deterministic`` and every v1 trajectory): the
  command sits in a code block of the assistant text, the output comes back as ``user``;
* the OpenAI Responses API (``litellm_response``): ``{"object": "response", "output":
  [...]}`` objects, ``function_call_output`` items and ``{"type": "message"}`` items.

Every message gets its position in the list as id: the list is append-only, so the id of a
message never changes, which is what keyed ingestion needs. The rendered context is
translated back by id, so the model receives the agent's own dicts for everything that is
shown unchanged and one new memory dict in the shape of the history, marked in its
``extra`` (which mini-swe-agent's model classes never send). :data:`CODEC` is this module
as the core's :class:`~flexamem_core.host.HostCodec`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from flexamem_core import Message, MessageError, ToolCall
from flexamem_core.host import is_marked, mark
from flexamem_core.host.incremental import read_keys

Style = Literal["chat", "responses"]

#: Roles mini-swe-agent writes that never reach a model (the run's final record).
SKIPPED_ROLES = frozenset({"exit"})


@dataclass(frozen=True)
class ConvertedHistory:
    """The history as FlexA-Mem messages, with the way back to the host's dicts."""

    messages: list[Message]
    originals: dict[str, Mapping[str, Any]]
    style: Style
    #: The core message of each id (None: made per call from ``messages``).
    by_id: dict[str, Message] | None = None


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _text_parts(content: Any) -> str:
    """Text of Responses-API content parts (``input_text`` / ``output_text`` / plain text)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    out: list[str] = []
    for part in content:
        kind = _get(part, "type", "")
        if kind in ("input_text", "output_text", "text", "summary_text"):
            out.append(str(_get(part, "text", "")))
        elif kind:
            out.append(f"[{str(kind).replace('input_', '')}]")
    return "\n".join(t for t in out if t)


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _response_to_message(msg: Mapping[str, Any], mid: str) -> Message:
    """One Responses-API response object: its text and function calls as one assistant turn."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in msg.get("output") or ():
        kind = _get(item, "type")
        if kind == "message":
            texts.append(_text_parts(_get(item, "content")))
        elif kind == "function_call":
            call_id = _get(item, "call_id") or _get(item, "id")
            calls.append(ToolCall(name=str(_get(item, "name") or "unknown_tool"),
                                  arguments=_arguments(_get(item, "arguments", "")),
                                  id=str(call_id) if call_id else None))
    return Message(role="assistant", content="\n".join(t for t in texts if t), tool_calls=tuple(calls), id=mid)


def _item_to_message(msg: Mapping[str, Any], mid: str) -> Message | None:
    """A top-level Responses-API item (``message``, ``function_call_output``, ``function_call``)."""
    kind = msg.get("type")
    if kind == "function_call_output":
        output = msg.get("output")
        return Message(role="tool", content=output if isinstance(output, str) else _text_parts(output),
                       tool_call_id=msg.get("call_id"), id=mid)
    if kind == "function_call":
        call_id = msg.get("call_id") or msg.get("id")
        return Message(role="assistant", id=mid, tool_calls=(ToolCall(
            name=str(msg.get("name") or "unknown_tool"), arguments=_arguments(msg.get("arguments", "")),
            id=str(call_id) if call_id else None),))
    if kind == "message":
        role = msg.get("role", "user")
        role = "system" if role == "developer" else role
        if role in SKIPPED_ROLES:
            return None
        return Message(role=role, content=_text_parts(msg.get("content")), id=mid)
    if kind == "reasoning":
        return None
    raise MessageError(f"unknown Responses-API item type {kind!r}")


def _chat_to_message(msg: Mapping[str, Any], mid: str) -> Message | None:
    role = msg.get("role")
    if role in SKIPPED_ROLES:
        return None
    if role == "developer":
        role = "system"
    base = Message.from_dict({
        "role": role,
        "content": msg.get("content"),
        "tool_calls": msg.get("tool_calls") or (),
        "tool_call_id": msg.get("tool_call_id"),
        "name": msg.get("name"),
    })
    return Message(role=base.role, content=base.content, tool_calls=base.tool_calls,
                   tool_call_id=base.tool_call_id, name=base.name, id=mid)


def _is_item(msg: Mapping[str, Any]) -> bool:
    """A top-level Responses-API item (chat messages have a role and no ``type``)."""
    return msg.get("type") == "message" or ("type" in msg and "role" not in msg)


def detect_style(history: Sequence[Mapping[str, Any]]) -> Style:
    """``responses`` when the history is made of Responses-API items, else ``chat``."""
    for msg in history:
        if isinstance(msg, Mapping) and (msg.get("object") == "response" or _is_item(msg)):
            return "responses"
    return "chat"


def to_core(history: Sequence[Mapping[str, Any]]) -> ConvertedHistory:
    """Convert the agent's message list (never mutated) into FlexA-Mem messages.

    The id of each message is its index in ``history``. ``exit`` messages (the run's
    final record, never sent to a model) and Responses-API reasoning items are skipped.
    Raises :class:`MessageError` naming the index of a message it cannot understand.
    """
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise MessageError(f"messages must be a list of dicts, got {type(history).__name__}")
    converted = ConvertedHistory(messages=[], originals={}, style=detect_style(history), by_id={})
    _convert_into(converted, history, 0)
    return converted


def extend(converted: ConvertedHistory, history: Sequence[Mapping[str, Any]], start: int) -> ConvertedHistory:
    """``converted`` (of ``history[:start]``) extended by the rest of ``history``, in place."""
    if converted.by_id is None:
        return to_core(history)
    _convert_into(converted, history, start)
    if converted.style == "responses" or detect_style(history[start:]) == "chat":
        return converted
    return ConvertedHistory(converted.messages, converted.originals, "responses", converted.by_id)


def _convert_into(converted: ConvertedHistory, history: Sequence[Mapping[str, Any]], start: int) -> None:
    """Append the conversion of ``history[start:]`` (all or nothing: a bad message raises first)."""
    messages: list[tuple[str, Message]] = []
    for i in range(start, len(history)):
        msg = history[i]
        if not isinstance(msg, Mapping):
            raise MessageError(f"message {i}: expected a dict, got {type(msg).__name__}")
        mid = str(i)
        try:
            if msg.get("object") == "response":
                one: Message | None = _response_to_message(msg, mid)
            elif _is_item(msg):
                one = _item_to_message(msg, mid)
            else:
                one = _chat_to_message(msg, mid)
        except MessageError as exc:
            raise MessageError(f"message {i}: {exc}") from None
        if one is not None:
            messages.append((mid, one))
    by_id = converted.by_id if converted.by_id is not None else {}
    for mid, one in messages:
        converted.originals[mid] = history[int(mid)]
        by_id[mid] = one
    converted.messages.extend(one for _, one in messages)


def memory_dict(text: str, style: Style) -> dict[str, Any]:
    """The memory message in the shape of the host's history (``extra`` is never sent)."""
    if style == "responses":
        return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}],
                "extra": mark()}
    return {"role": "user", "content": text, "extra": mark()}


def _fallback_dict(message: Message, style: Style) -> dict[str, Any]:
    """A message the renderer made itself (not one of the host's): plain host shape."""
    if style == "responses":
        if message.role == "tool":
            return {"type": "function_call_output", "call_id": message.tool_call_id, "output": message.text}
        kind = "output_text" if message.role == "assistant" else "input_text"
        return {"type": "message", "role": message.role, "content": [{"type": kind, "text": message.text}]}
    out: dict[str, Any] = {"role": message.role, "content": message.text}
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def _with_text(original: Mapping[str, Any], message: Message, style: Style) -> dict[str, Any] | None:
    """The host's dict with only its text replaced (an output the renderer cut to fit)."""
    if style == "chat" and isinstance(original.get("content"), str):
        return {**original, "content": message.text}
    if original.get("type") == "function_call_output":
        return {**original, "output": message.text}
    return None


def to_host(rendered: Sequence[Message], converted: ConvertedHistory) -> list[Mapping[str, Any]]:
    """The rendered messages as the host's dicts.

    A message shown unchanged is the host's own dict (same object); one the renderer cut
    to fit keeps the host's dict with the cut text; the memory message and messages the
    renderer made or rewrote (pairing repairs) are new dicts in the history's shape.
    """
    index = converted.by_id if converted.by_id is not None else \
        {m.id: m for m in converted.messages if m.id is not None}
    out: list[Mapping[str, Any]] = []
    for message in rendered:
        if is_marked(message.metadata):
            out.append(memory_dict(message.text, converted.style))
            continue
        source = index.get(message.id) if message.id is not None else None
        original = converted.originals.get(message.id) if source is not None else None
        if source is not None and original is not None:
            if message == source:
                out.append(original)
                continue
            same_shape = (message.role, message.tool_calls, message.tool_call_id) == \
                (source.role, source.tool_calls, source.tool_call_id)
            cut = _with_text(original, message, converted.style) if same_shape else None
            if cut is not None:
                out.append(cut)
                continue
        out.append(_fallback_dict(message, converted.style))
    return out


def is_memory_dict(message: Mapping[str, Any]) -> bool:
    """Whether a host dict is the FlexA-Mem memory message (the core's mark in its ``extra``)."""
    return is_marked(message.get("extra"))


class MiniSweAgentCodec:
    """mini-swe-agent's message dicts <-> core messages, for :func:`flexamem_core.host.render_host`
    (incremental: a growing history converts only its new dicts)."""

    edit_keys = (read_keys("content"), read_keys("tool_calls"))
    memo_key = None
    memo_from = 0

    def to_core(self, messages: Sequence[Mapping[str, Any]]) -> ConvertedHistory:
        return to_core(messages)

    def extend(self, converted: ConvertedHistory, messages: Sequence[Mapping[str, Any]],
               start: int) -> ConvertedHistory:
        return extend(converted, messages, start)

    def to_host(self, rendered: Sequence[Message], converted: ConvertedHistory) -> list[Mapping[str, Any]]:
        return to_host(rendered, converted)


CODEC = MiniSweAgentCodec()
