"""Everything sent is valid text: no control characters, no lone surrogates.

A provider receives JSON: a lone surrogate cannot be encoded as UTF-8 at all, and NUL or
ESC bytes reach the model as noise. Counts are made on the cleaned text, so sending the
cleaned copy is what makes the count the count of what is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ...model.messages import Message, clean_text, needs_cleaning
from .base import Context, MessageProperty


def _dirty(value: Any) -> bool:
    if isinstance(value, str):
        return needs_cleaning(value)
    if isinstance(value, Mapping):
        return any(_dirty(k) or _dirty(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_dirty(v) for v in value)
    return False


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_clean(v) for v in value)
    return value


def message_is_sendable(m: Message) -> bool:
    """Whether every string the message carries is already clean text."""
    return not (_dirty(m.content) or _dirty(m.tool_call_id) or _dirty(m.id) or _dirty(m.name)
                or any(_dirty(c.name) or _dirty(c.arguments) or _dirty(c.id) for c in m.tool_calls))


def sendable(m: Message) -> Message:
    """``m`` itself when it is clean, else a cleaned copy marked ``flexamem_sanitised``."""
    if message_is_sendable(m):
        return m
    calls = tuple(replace(c, name=clean_text(c.name), arguments=clean_text(c.arguments),
                          id=_clean(c.id)) for c in m.tool_calls)
    return replace(m, content=_clean(m.content), tool_calls=calls, tool_call_id=_clean(m.tool_call_id),
                   id=_clean(m.id), name=_clean(m.name), metadata={**m.metadata, "flexamem_sanitised": True})


class SendableText(MessageProperty):
    name = "sendable_text"
    rule = "no control character (tab, newline and CR aside) and no lone surrogate in anything sent"

    def problem(self, messages: Sequence[Message], context: Context | None = None) -> str | None:
        bad = [i for i, m in enumerate(messages) if not message_is_sendable(m)]
        return f"control characters or lone surrogates in messages {bad}" if bad else None

    def enforce(self, messages: Sequence[Message]) -> tuple[list[Message], int]:
        out = [sendable(m) for m in messages]
        return out, sum(1 for a, b in zip(messages, out) if a is not b)
