"""What every method implements, and the environment all methods share.

All methods see the same units, tokenizer, embedder and budget rule: the rendered context
must stay within ``B_bar = 0.95 * budget`` counted by one shared message counter, and a
history that already fits passes through unchanged.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from flexamem_core import Embedder, FlexAMemConfig, Message, Tokenizer
from flexamem_core.host import config_for_budget
from flexamem_core.model.messages import message_text
from flexamem_core.request.counting import PER_REQUEST, message_tokens
from flexamem_core.request.marker import mark
from flexamem_core.write.units import PackedUnit, pack_units

from ..items import Question

#: Messages whose counts :meth:`Env.count` keeps (cleared when full).
COUNT_CACHE = 20_000


@dataclass
class Env:
    """Shared building blocks: tokenizer, embedder (loaded on first use), base config."""

    tokenizer: Tokenizer
    embedder_factory: Any = None
    config: FlexAMemConfig = field(default_factory=FlexAMemConfig)
    #: id(message) -> (message, its tokens with format overhead); see :meth:`count`.
    _counts: dict[int, tuple[Message, int]] = field(default_factory=dict, repr=False, compare=False)
    #: id(message) -> (message, its text as matched); see :meth:`context_text`.
    _texts: dict[int, tuple[Message, str]] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def embedder(self) -> Embedder:
        if self.embedder_factory is None:
            from flexamem_core.index.embeddings import default_embedder

            return default_embedder()
        return self.embedder_factory()

    def agent_unit_tokens(self, budget: int) -> int:
        """The agent unit size at ``budget``: the base config's, capped as the adapters cap it
        (:func:`flexamem_core.host.config_for_budget`), so every method sees the same units."""
        return config_for_budget(budget, FlexAMemConfig(**self.config.model_dump(exclude_unset=True))
                                 ).tuning.agent_unit_tokens

    def count(self, messages: Sequence[Message]) -> int:
        """Tokens of a request, counted as the core counts its own renders
        (:func:`flexamem_core.request.counting.count_messages`).

        Messages are immutable, so each message's count is kept by identity (the message is
        kept with it, so an id is never reused while cached): methods count the same history
        messages many times per call, and a message's text is rebuilt on every access. A new
        long message (a memory text rendered again with one element less) is counted from
        the memoised counts of its lines, exactly, by the core's tokenizer
        (:func:`flexamem_core.request.tokens.line_parts`).
        """
        if not messages:
            return 0
        cache = self._counts
        counter = self.tokenizer
        total = PER_REQUEST
        for m in messages:
            hit = cache.get(id(m))
            if hit is None or hit[0] is not m:
                n = message_tokens(m, counter)
                if len(cache) >= COUNT_CACHE:
                    cache.clear()
                cache[id(m)] = (m, n)
                total += n
            else:
                total += hit[1]
        return total

    def context_text(self, messages: Sequence[Message]) -> str:
        """:func:`context_text`, with each message's text kept by identity (a message's text
        is cleaned again on every access, and most of a context is the same messages call
        after call)."""
        cache = self._texts
        parts = []
        for m in messages:
            hit = cache.get(id(m))
            if hit is None or hit[0] is not m:
                if len(cache) >= COUNT_CACHE:
                    cache.clear()
                hit = cache[id(m)] = (m, message_text(m))
            parts.append(hit[1])
        return "\n\n".join(parts)

    def effective(self, budget: int) -> int:
        """B_bar for a budget."""
        return self.config.with_budget(budget).effective_budget


@dataclass
class WriteCost:
    """What writing memory cost: wall time, units written, LLM calls."""

    ms: float = 0.0
    units: int = 0
    llm_calls: int = 0


def context_text(messages: Sequence[Message]) -> str:
    """The text of a rendered context, as matched by the metrics and dumped."""
    return "\n\n".join(message_text(m) for m in messages)


def split_prefix(history: Sequence[Message]) -> tuple[list[Message], list[Message]]:
    """Fixed prompt (system messages and the task, i.e. the first user message) and the rest."""
    prefix: list[Message] = []
    i = 0
    while i < len(history) and history[i].role == "system":
        prefix.append(history[i])
        i += 1
    if i < len(history) and history[i].role == "user":
        prefix.append(history[i])
        i += 1
    return prefix, list(history[i:])


def memory_message(text: str) -> Message:
    """A memory block in the same form as the core's memory message."""
    return Message(role="user", content=f"<memory>\n{text}\n</memory>", metadata=mark())


def question_messages(question: Question) -> list[Message]:
    return [Message(role="user", content=question.text)]


def warm_embedder(env: Env) -> None:
    env.embedder.embed(["warm up the embedder"])


class Method(ABC):
    """A memory under evaluation.

    Reader use: :meth:`write` once per conversation, then :meth:`question_context` per
    question and budget. Agent use: :meth:`step_context` before every model call, in order
    (an instance may keep state across calls, per budget).
    """

    name: ClassVar[str]
    label: ClassVar[str] = ""
    #: False for the reference that ignores the budget.
    bounded: ClassVar[bool] = True

    def __init__(self, env: Env, shared: dict[str, Any]) -> None:
        self.env = env
        self.shared = shared
        self.cost = WriteCost()

    @classmethod
    def warm(cls, env: Env) -> None:
        """Load what the first call would otherwise load, so render timings exclude it."""
        del env  # nothing to load by default

    #: The datasets the method means something on (None: all).
    datasets: ClassVar[tuple[str, ...] | None] = None

    @classmethod
    def unavailable(cls, dataset: str | None = None) -> str | None:
        """Why this method cannot run with the installed core, or on ``dataset`` (None: it can)."""
        if dataset is not None and cls.datasets is not None and dataset not in cls.datasets:
            return f"only for {', '.join(cls.datasets)}"
        return None

    # ----------------------------------------------------------------- reader setting
    def write(self, history: Sequence[Message]) -> None:
        """Build whatever the method keeps about a conversation (timed by the caller)."""
        self.history = list(history)

    def history_fits(self, fixed: Sequence[Message], limit: int) -> bool:
        """Whether ``history + fixed`` counts at most ``limit`` tokens (the history's count
        is kept: a request's count is the sum of its messages' counts plus a constant)."""
        tokens = self.__dict__.get("_history_tokens")
        if tokens is None:
            tokens = self._history_tokens = self.env.count(self.history)
        extra = self.env.count(fixed)
        both = PER_REQUEST if self.history and fixed else 0
        return tokens + extra - both <= limit

    @abstractmethod
    def question_context(self, question: Question, budget: int) -> list[Message]:
        """The context a reader model gets for a question: memory, then the question."""

    # ------------------------------------------------------------------ agent setting
    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        """The context sent before the next action, given the history so far; below the
        effective budget every method passes the history through unchanged."""
        limit = self.env.effective(budget)
        if self.env.count(history) <= limit:
            return list(history)
        return self.fit_step(history, budget, limit)

    def fit_step(self, history: Sequence[Message], budget: int, limit: int) -> list[Message]:
        """The context of a step whose history exceeds ``limit`` (methods that do not
        override :meth:`step_context` implement this)."""
        raise NotImplementedError(f"{type(self).__name__} renders no agent steps")

    # ---------------------------------------------------------------------- helpers
    def reader_units(self) -> list[PackedUnit]:
        """Reader units of the conversation (shared between methods of one item)."""
        key = "reader_units"
        if key not in self.shared:
            t0 = time.perf_counter()
            self.shared[key] = pack_units(self.history, "reader", self.env.tokenizer,
                                          self.env.config.tuning.reader_unit_tokens, final=True)
            self.shared["reader_units_ms"] = (time.perf_counter() - t0) * 1000
        return self.shared[key]

    def agent_units(self, rest: Sequence[Message], budget: int) -> list[PackedUnit]:
        """Agent units of the history after the fixed prompt, of the size every method uses at
        ``budget`` (:meth:`Env.agent_unit_tokens`)."""
        return pack_units(rest, "agent", self.env.tokenizer, self.env.agent_unit_tokens(budget))
