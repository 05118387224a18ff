"""An independent count of a chat-completions request, serialised the way it goes to a provider.

Written apart from the library: the request body is the OpenAI chat-completions JSON
(``messages`` with ``role``, ``content``, ``name``, ``tool_calls`` whose
``function.arguments`` is a JSON string, ``tool_call_id``; a ``tools`` list of function
schemas), each framework's messages turned into it by the framework's own converter where
it has one. The count is the rule of OpenAI's cookbook (``num_tokens_from_messages``):
3 tokens per message, the tokens of every string value (the role included), one more for a
name, 3 to prime the reply; the pieces the cookbook leaves out are counted as the JSON the
body carries them in: each message's ``tool_calls`` list and each tool schema, compact
(``separators=(",", ":")``, ``ensure_ascii=False``: what httpx writes). o200k
``encode_ordinary`` counts every piece whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from flexamem_core.request.tokens import load_o200k_encoding

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3


def body_json(value: Any) -> str:
    """A value as the request body writes it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tokens(text: str) -> int:
    return len(load_o200k_encoding().encode_ordinary(text))


def _content_tokens(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return _tokens(content)
    return sum(_tokens(str(part.get("text", ""))) for part in content
               if isinstance(part, Mapping) and part.get("type") in ("text", "input_text", "output_text"))


def message_tokens(message: Mapping[str, Any]) -> int:
    """One chat-completions message dict."""
    n = TOKENS_PER_MESSAGE
    for key, value in message.items():
        if key == "content":
            n += _content_tokens(value)
        elif key == "tool_calls":
            n += _tokens(body_json(list(value))) if value else 0
        elif isinstance(value, str):
            n += _tokens(value)
            if key == "name":
                n += TOKENS_PER_NAME
    return n


def request_tokens(messages: Sequence[Mapping[str, Any]], tools: Iterable[Mapping[str, Any]] = ()) -> int:
    """The whole request: its messages, the reply priming and each tool schema as JSON."""
    return REPLY_PRIMING + sum(message_tokens(m) for m in messages) + sum(_tokens(body_json(t)) for t in tools)


def core_to_wire(message: Any) -> dict[str, Any]:
    """A core ``Message`` as a chat-completions dict (content parts kept as parts)."""
    content = message.content if isinstance(message.content, str) else [dict(p) for p in message.content]
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.name:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def shortfall(library: int, independent: int) -> float:
    """How far below the independent count the library counted, as a share of it (< 0: it counted more)."""
    return (independent - library) / independent if independent else 0.0
