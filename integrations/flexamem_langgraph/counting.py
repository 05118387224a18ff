"""Count with a LangChain ``token_counter``: the callable ``trim_messages`` and
``SummarizationMiddleware`` take (messages -> int), or a chat model's own counter.

The core measures texts (``Tokenizer.count``/``split``); a text is counted as the
counter counts one HumanMessage holding it, less what an empty one costs, so the
counter's per-message overhead is not counted on top of the core's own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

TokenCounter = Callable[[Sequence[BaseMessage]], int]


def as_counter(token_counter: Any) -> TokenCounter:
    """A messages -> int callable from a callable or a model with ``get_num_tokens_from_messages``."""
    method = getattr(token_counter, "get_num_tokens_from_messages", None)
    if callable(method):
        return lambda messages: int(method(list(messages)))
    if callable(token_counter):
        return token_counter
    raise TypeError(f"token_counter must be a callable (messages -> int) or a chat model, "
                    f"got {type(token_counter).__name__}")


class TokenCounterTokenizer:
    """The core's ``Tokenizer`` protocol over a LangChain token counter."""

    def __init__(self, token_counter: Any, cache_size: int = 100_000) -> None:
        counter = as_counter(token_counter)
        self.name = f"langchain:{getattr(token_counter, '__name__', type(token_counter).__name__)}"
        self._counter = counter
        self._empty = int(counter([HumanMessage(content="")]))
        self._cached = lru_cache(maxsize=cache_size)(self._count)

    def _count(self, text: str) -> int:
        return max(0, int(self._counter([HumanMessage(content=text)])) - self._empty) if text else 0

    def count(self, text: str) -> int:
        return self._cached(text)

    def split(self, text: str, max_tokens: int) -> list[str]:
        """Consecutive parts of at most ``max_tokens`` tokens, cut after a line break or space
        when one is near (binary search on the longest prefix that fits)."""
        if max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        parts: list[str] = []
        rest = text
        while rest:
            if self._count(rest) <= max_tokens:
                parts.append(rest)
                break
            lo, hi = 1, len(rest)  # the longest prefix rest[:lo] that fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if self._count(rest[:mid]) <= max_tokens:
                    lo = mid
                else:
                    hi = mid - 1
            cut = max(rest.rfind("\n", 0, lo), rest.rfind(" ", 0, lo)) + 1
            cut = cut if cut > lo // 2 else lo
            parts.append(rest[:cut])
            rest = rest[cut:]
        return parts
