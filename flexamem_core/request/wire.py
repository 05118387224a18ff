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

from ..model.messages import ToolCall, clean_text


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
