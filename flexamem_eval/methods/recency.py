"""Reference and recency baselines: the full history, and truncation to the newest units."""

from __future__ import annotations

from collections.abc import Sequence

from flexamem_core import Message

from ..items import Question
from .base import Method, memory_message, question_messages, split_prefix
from .layout import fit_newest


class Full(Method):
    """The whole history, no budget (a reference, not a contender)."""

    name = "full"
    label = "full (no budget)"
    bounded = False

    def question_context(self, question: Question, budget: int) -> list[Message]:
        return [*self.history, *question_messages(question)]

    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        return list(history)


class Truncation(Method):
    """The newest units that fit, shown raw; everything older is gone."""

    name = "truncation"

    def question_context(self, question: Question, budget: int) -> list[Message]:
        fixed = question_messages(question)
        if self.history_fits(fixed, self.env.effective(budget)):
            return [*self.history, *fixed]
        units = self.reader_units()
        room = self.env.effective(budget) - self.env.count([memory_message(""), *fixed])
        kept: list[str] = []
        used = 0
        for unit in reversed(units):
            cost = self.env.tokenizer.count(unit.raw) + 2
            if used + cost > room:
                break
            kept.insert(0, unit.raw)
            used += cost
        return [memory_message("\n\n".join(kept)), *fixed] if kept else fixed

    def fit_step(self, history: Sequence[Message], budget: int, limit: int) -> list[Message]:
        prefix, rest = split_prefix(history)
        units = self.agent_units(rest, budget)
        kept: list[Message] = []
        for unit in reversed(units):
            candidate = [*unit.messages, *kept]
            if kept and self.env.count([*prefix, *candidate]) > limit:
                break
            kept = candidate
        if self.env.count([*prefix, *kept]) > limit:  # the newest unit alone is over the budget
            kept = fit_newest(self.env, prefix, kept, limit)
        return [*prefix, *kept]
