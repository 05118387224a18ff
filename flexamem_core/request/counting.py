"""Tokens of a request as the provider counts what is sent: each message's text, its tool
calls as the JSON sent, its ids and names, and the chat format's per-message overhead."""

from __future__ import annotations

from collections.abc import Sequence

from ..model.messages import Message, clean_text
from ..model.protocols import Tokenizer
from .wire import tool_calls_json

#: Tokens a chat format adds per message (role and separators), and once per request.
PER_MESSAGE = 4
PER_REQUEST = 3


def message_tokens(message: Message, tokenizer: Tokenizer) -> int:
    """Tokens of one message as the request carries it: the format's ``PER_MESSAGE``, its text,
    its tool calls as the JSON sent (``function.arguments`` a JSON string inside it), and the
    ``tool_call_id`` and ``name`` fields (a name costs one more token, as OpenAI counts it)."""
    n = PER_MESSAGE + tokenizer.count(message.text)
    if message.tool_calls:
        n += tokenizer.count(tool_calls_json(message.tool_calls))
    if message.tool_call_id:
        n += tokenizer.count(clean_text(message.tool_call_id))
    if message.name:
        n += 1 + tokenizer.count(clean_text(message.name))
    return n


def count_messages(messages: Sequence[Message], tokenizer: Tokenizer, extra_tokens: int = 0) -> int:
    """Tokens of a request: every message as sent (:func:`message_tokens`), plus the request's own."""
    if not messages:
        return extra_tokens
    return PER_REQUEST + extra_tokens + sum(message_tokens(m, tokenizer) for m in messages)


def exceeds(messages: Sequence[Message], tokenizer: Tokenizer, limit: int, extra_tokens: int = 0) -> bool:
    """Whether a request is over ``limit`` tokens, counting newest first and stopping early
    (so a long history below the budget is not re-counted in full on every call)."""
    total = PER_REQUEST + extra_tokens
    for m in reversed(messages):
        total += message_tokens(m, tokenizer)
        if total > limit:
            return True
    return False
