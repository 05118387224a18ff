"""What a provider's prompt cache would reuse between two consecutive requests, and its price.

Providers bill a request prefix they have seen before at a fraction of the input price. The
cached part of a request is its longest common token prefix with the previous request of
the same thread, counted the way :func:`flexamem_core.request.counting.count_messages` counts a
request (per message: ``PER_MESSAGE`` format tokens, then the message as sent), so the cached part of
a request is never more than its count. A message's format tokens are reused only when
its role is the same as the previous request's message at that place.

Price model (stated in docs/evaluation.md and in every result that uses it): a cached input token
costs ``CACHED_PRICE`` = 0.1 of a plain input token, and a new one ``NEW_PRICE`` = 1.25
(writing a new prefix to the cache, as Anthropic bills it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model.messages import Message, message_text
from ..model.protocols import Tokenizer
from ..request.counting import PER_MESSAGE, PER_REQUEST, count_messages, message_tokens

CACHED_PRICE = 0.1
NEW_PRICE = 1.25


def call_cost(tokens: int, cached: int) -> float:
    """Price of one request in plain-input-token units under the price model."""
    return CACHED_PRICE * cached + NEW_PRICE * (tokens - cached)


def _encode(tokenizer: Tokenizer, text: str) -> list[int]:
    encoding = getattr(tokenizer, "encoding", None)
    if encoding is not None:
        return list(encoding.encode_ordinary(text))
    # A tokenizer without token ids: compare its consecutive parts of one token each.
    return [hash(part) for part in tokenizer.split(text, 1)]


def common_prefix_tokens(previous: Sequence[Message], current: Sequence[Message], tokenizer: Tokenizer) -> int:
    """Tokens at the start of ``current`` that are identical to the start of ``previous``."""
    if not previous or not current:
        return 0
    cached = PER_REQUEST
    for a, b in zip(previous, current):
        if a.role != b.role:
            return cached
        ta, tb = message_text(a), message_text(b)
        if ta == tb and (a.tool_call_id, a.name) == (b.tool_call_id, b.name):
            cached += message_tokens(b, tokenizer)
            continue
        cached += PER_MESSAGE
        ea, eb = _encode(tokenizer, ta), _encode(tokenizer, tb)
        n = 0
        for x, y in zip(ea, eb):
            if x != y:
                break
            n += 1
        return cached + n
    return cached


@dataclass
class CacheMeter:
    """Follows one thread's requests: cached tokens, share and cost, call after call."""

    tokenizer: Tokenizer
    calls: int = 0
    tokens: int = 0
    cached: int = 0
    cost: float = 0.0
    _previous: list[Message] | None = None

    def add(self, messages: Sequence[Message], tokens: int | None = None) -> tuple[int, int]:
        """Account one request; returns (its tokens, its cached tokens)."""
        total = count_messages(messages, self.tokenizer) if tokens is None else tokens
        hit = min(total, common_prefix_tokens(self._previous or [], messages, self.tokenizer))
        self._previous = list(messages)
        self.calls += 1
        self.tokens += total
        self.cached += hit
        self.cost += call_cost(total, hit)
        return total, hit

    @property
    def cached_prefix_share(self) -> float:
        return self.cached / self.tokens if self.tokens else 0.0

    @property
    def cost_per_call(self) -> float:
        return self.cost / self.calls if self.calls else 0.0
