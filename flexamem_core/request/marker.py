"""The one mark of the memory message, for every host's own metadata field.

The rendered ``<memory>`` message is new: it is not one of the host's messages, and a host
must be able to tell it apart (to keep it out of its state, to label it in a log) without
parsing its text. Every side writes the same key and value into the field its message type
has for data that is never sent to a provider: the core's ``Message.metadata``, LangChain's
``response_metadata``, mini-swe-agent's ``extra``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model.messages import Message, clean_text

#: Key and value of the mark.
MEMORY_KEY = "flexamem"
MEMORY_VALUE = "memory"
#: Id of the memory message (deterministic, so the request prefix stays cacheable).
MEMORY_ID = "flexamem-memory"


def mark(meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A copy of ``meta`` (or a new dict) carrying the mark."""
    return {**(meta or {}), MEMORY_KEY: MEMORY_VALUE}


def is_marked(meta: object) -> bool:
    """Whether a metadata field carries the mark (anything that is not a mapping does not)."""
    return isinstance(meta, Mapping) and meta.get(MEMORY_KEY) == MEMORY_VALUE


def memory_message(text: str) -> Message:
    """The one tagged memory message (deterministic id, so the prefix stays cacheable).

    Its text is cleaned like everything sent (a record may quote a tool call's parsed
    arguments, lone surrogates included)."""
    return Message(role="user", content=clean_text(text), id=MEMORY_ID, metadata=mark())


def cache_breakpoints(messages: Sequence[Message]) -> tuple[int, ...]:
    """Indices of the messages after which a stable part of a rendered request ends: the last
    message before the memory message (the fixed prompt and any head), and the memory message.
    Empty without a memory message (a history sent as it is: the host's own mark at its end is
    all it needs). Where a provider caches only at marked places, an adapter marks these
    (:mod:`flexamem_core.cache.breakpoints`)."""
    at = next((i for i, m in enumerate(messages) if is_marked(m.metadata)), None)
    if at is None:
        return ()
    return (at - 1, at) if at else (at,)
