"""The JSON a request carries, written one way for everything that is counted from it.

Tool calls and tool schemas reach the provider as JSON inside the request body; their
tokens are counted from that JSON, not from a display form. httpx, which the OpenAI and
Anthropic SDKs send through, writes the body compact and unescaped
(``separators=(",", ":")``, ``ensure_ascii=False``) with keys in the order given, and so
does :func:`wire_json`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ..model.messages import Message, ToolCall, clean_text


def wire_json(value: Any) -> str:
    """``value`` as the request body writes it (objects it cannot write become their ``str``)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def tool_call_wire(call: ToolCall) -> dict[str, Any]:
    """One tool call in the chat-completions form (``arguments`` is the JSON string as held)."""
    return {"id": clean_text(call.id or ""), "type": "function",
            "function": {"name": clean_text(call.name), "arguments": clean_text(call.arguments)}}


@lru_cache(maxsize=8192)
def tool_calls_json(calls: Sequence[ToolCall]) -> str:
    """The ``tool_calls`` list of an assistant message as the request carries it (memoised:
    messages are counted many times per render)."""
    return wire_json([tool_call_wire(c) for c in calls])


def chat_message(message: Message) -> dict[str, Any]:
    """One message in the chat-completions form a provider client sends (OpenAI's and the many
    APIs that share it): role, content, tool calls with JSON-string arguments, the result's
    ``tool_call_id``, the ``name``; nothing the provider does not read (no ids, no metadata)."""
    out: dict[str, Any] = {"role": message.role,
                           "content": message.content if isinstance(message.content, str) else list(message.content)}
    if message.tool_calls:
        out["tool_calls"] = [tool_call_wire(c) for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out
