"""Where a request's stable parts end, for providers that cache only at explicit breakpoints,
and what such a provider bills.

Some providers reuse any prefix they saw before (:mod:`.prefix` prices that). Anthropic
caches a prefix only where the request marks one (``cache_control``, at most
:data:`MAX_BREAKPOINTS` per request), and a later request reads it only from a marked place
of its own, looking back at most :data:`LOOKBACK` blocks from it. mini-swe-agent and
LangChain's Anthropic prompt-caching middleware mark the end of each request, so an appended
step reads the previous request whole; but once the memory changes, nothing marked before it
matches and the whole request is billed as new, the fixed prompt included.

A FlexA-Mem request has two more places where what precedes stays the same for many calls:
the end of the fixed prompt (the system prompt, the task and any head), which every memory
of the thread follows, and the end of the memory message, which the steps appended after it
follow. :func:`~flexamem_core.request.marker.cache_breakpoints` names them
(``Rendered.cache_breakpoints()``), so an adapter can mark them beside the host's
own mark at the end (three of the four allowed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..model.messages import Message
from ..model.protocols import Tokenizer
from ..request.counting import count_messages
from ..request.marker import cache_breakpoints

#: Marks a request may carry (Anthropic's limit).
MAX_BREAKPOINTS = 4
#: Blocks a marked place looks back for an earlier request's mark (Anthropic's lookback).
LOOKBACK = 20


def _fingerprints(messages: Sequence[Message]) -> list[int]:
    """One value per prefix of ``messages``: equal prefixes, equal values (within a process)."""
    out, h = [], 0
    for m in messages:
        h = hash((h, m.role, m.text, m.name, m.tool_call_id, tuple((c.id, c.name, c.arguments) for c in m.tool_calls)))
        out.append(h)
    return out


class BreakpointCache:
    """One thread's requests billed as a provider that caches at explicit marks does: a request
    reads the longest earlier-marked prefix within :data:`LOOKBACK` messages before one of its
    own marks, and writes a cache entry at each of its marks (entries never expire here; a
    provider's minimum cacheable length is not modelled)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self._entries: set[int] = set()

    def add(self, messages: Sequence[Message], marks: Iterable[int]) -> int:
        """Account one request marked after the messages at ``marks``; returns its cached tokens."""
        points = sorted({i for i in marks if 0 <= i < len(messages)})[-MAX_BREAKPOINTS:]
        prints = _fingerprints(messages)
        best = -1
        for b in points:
            for j in range(b, max(-1, b - LOOKBACK), -1):
                if j <= best:
                    break
                if prints[j] in self._entries:
                    best = j
                    break
        self._entries.update(prints[b] for b in points)
        return count_messages(messages[:best + 1], self.tokenizer) if best >= 0 else 0


def host_marks(messages: Sequence[Message]) -> tuple[int, ...]:
    """The marks a request carries where the host marks its end and FlexA-Mem its stable parts."""
    return (*cache_breakpoints(messages), len(messages) - 1) if messages else ()
