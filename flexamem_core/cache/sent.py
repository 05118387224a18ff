"""The previous request of a thread, what it was made from, and appending to it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..config import FlexAMemConfig
from ..model.messages import Message, quick_fingerprint, same_prefix
from ..model.protocols import Tokenizer
from ..render.outcome import CacheStep, Outcome
from ..request.counting import message_tokens
from ..request.properties import apply_properties, sendable


@dataclass(frozen=True)
class SentRequest:
    """The previous request of a thread and what it was made from."""

    budget: int
    extra_tokens: int
    query: str | None
    source: list[Message]
    outcome: Outcome
    #: ``source[verbatim_from:]`` ends the request unchanged (None: it was cut or repaired).
    verbatim_from: int | None
    #: Old units the memory covers (the rest of the history follows it verbatim).
    old_units: int | None
    #: Messages of ``source`` this request was made from: the list may be the namespace's own
    #: copy of the history (:mod:`flexamem_core.model.history`), which later calls grow in place.
    length: int
    #: False for a request read from the store that another history was made from (then
    #: ``source`` is empty and no history continues it).
    known_source: bool = True

    @classmethod
    def of(cls, budget: int, extra_tokens: int, query: str | None, source: list[Message],
           outcome: Outcome) -> SentRequest:
        """Remember a request, noting how much of the history ends it unchanged."""
        out = outcome.messages
        n = 0
        while n < min(len(out), len(source)) and (
                out[-1 - n] is source[-1 - n] or
                quick_fingerprint(out[-1 - n]) == quick_fingerprint(sendable(source[-1 - n]))):
            n += 1
        window = len(source) if outcome.passthrough else outcome.report.window_messages
        verbatim_from = len(source) - n if window is not None and n >= window else None
        old_units = None if outcome.passthrough or outcome.memory_text is None else outcome.report.old_units
        return cls(budget, extra_tokens, query, source, replace(outcome, messages=list(out)), verbatim_from,
                   old_units, len(source))

    @property
    def messages(self) -> list[Message]:
        return self.outcome.messages

    def same_call(self, budget: int, extra_tokens: int, query: str | None) -> bool:
        """Whether a call has this request's settings (budget, extra tokens, query)."""
        return (self.budget, self.extra_tokens, self.query) == (budget, extra_tokens, query)

    def continues(self, history: Sequence[Message], budget: int, extra_tokens: int, query: str | None) -> bool:
        """Whether ``history`` is this request's history plus new messages, for the same call settings."""
        if not self.known_source:
            return False
        source = self.source if len(self.source) == self.length else self.source[:self.length]
        return self.same_call(budget, extra_tokens, query) and same_prefix(history, source)

    def after(self, source: list[Message], outcome: Outcome) -> SentRequest:
        """This request once ``outcome`` (an append to it) was sent."""
        return replace(self, source=source, outcome=replace(outcome, messages=list(outcome.messages)),
                       length=len(source))


def append_new(sent: SentRequest, history: list[Message], cfg: FlexAMemConfig, tokenizer: Tokenizer) -> Outcome | None:
    """The previous request plus the new messages, if they pair up and it fits.

    The same history again (a retry) gets the same request, whatever it held."""
    new = history[sent.length:]
    if sent.verbatim_from is None and new:
        return None
    prev = sent.outcome
    if not new:
        return prev.with_report(llm_calls=0, cache=CacheStep("append", True, reused_prefix_tokens=prev.tokens,
                                                             appended_messages=0))
    if any(m.role == "system" for m in new):
        return None
    if apply_properties([*history[sent.verbatim_from:sent.length], *new]).repairs:
        return None  # the new messages must pair up as they are
    new = [sendable(m) for m in new]  # sent as counted: control characters and lone surrogates cleaned
    tokens = prev.tokens + sum(message_tokens(m, tokenizer) for m in new)
    if tokens > cfg.effective_budget:
        return None
    return replace(prev, messages=[*prev.messages, *new], tokens=tokens,
                   report=replace(prev.report, total_tokens=tokens, llm_calls=0,
                                  cache=CacheStep("append", True, reused_prefix_tokens=prev.tokens,
                                                  appended_messages=len(new))))
