"""Observation masking (Lindenbauer et al., 2025), alone or with a rule-written log.

Once the context would exceed B_bar, tool outputs older than the last ten steps become a
placeholder; while it still exceeds, the outputs of more recent steps are masked too.
If every output is masked and it still does not fit, the oldest units leave: ``masking``
drops them, ``masking-log`` keeps one rule-written record per dropped unit (the core's
:class:`~flexamem_core.write.writers.RuleRecordWriter`) in a log, newest records first to stay.

Conversations have no tool outputs, so on reader histories both reduce to truncation
(``masking-log`` with the log of the units that no longer fit).
"""

from __future__ import annotations

from collections.abc import Sequence

from flexamem_core import Message
from flexamem_core.write.units import split_steps, to_unit
from flexamem_core.write.writers import RuleRecordWriter

from ..items import Question
from .base import Method, memory_message, question_messages, split_prefix
from .layout import fit_newest

RECENT_STEPS = 10


def placeholder(message: Message) -> Message:
    """The masked form of an observation: no content, only its size."""
    lines = message.text.count("\n") + 1
    return Message(role=message.role, content=f"[old output omitted: {lines} lines]",
                   tool_call_id=message.tool_call_id, id=message.id, name=message.name)


def mask_steps(steps: Sequence[Sequence[Message]], keep: int,
               masked_cache: dict[int, tuple[Message, Message]] | None = None) -> list[Message]:
    """Flatten steps, masking the outputs of all but the last ``keep`` steps.

    ``masked_cache`` keeps each output's placeholder by the output's identity, so the same
    placeholder object comes back call after call (and its count is not redone)."""
    out: list[Message] = []
    cut = len(steps) - keep
    for i, step in enumerate(steps):
        for j, m in enumerate(step):
            masked = i < cut and j > 0 and step[0].role == "assistant" and m.role in ("tool", "user")
            if not masked:
                out.append(m)
            elif masked_cache is None:
                out.append(placeholder(m))
            else:
                hit = masked_cache.get(id(m))
                if hit is None or hit[0] is not m:
                    hit = masked_cache[id(m)] = (m, placeholder(m))
                out.append(hit[1])
    return out


class Masking(Method):
    """Observation masking; the oldest units are dropped when masking is not enough."""

    name = "masking"
    keeps_log = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.writer = RuleRecordWriter(self.env.config.tuning.record_words)
        self._records: dict[str, str] = {}
        self._masked: dict[int, tuple[Message, Message]] = {}

    def _record(self, packed) -> str:
        unit = to_unit(packed, packed_kind(packed), None)
        if unit.key not in self._records:
            self._records[unit.key] = self.writer.write(unit).record
        return self._records[unit.key]

    def _log(self, dropped, room: int) -> str:
        """Records of dropped units, newest kept first, shown oldest first."""
        lines: list[str] = []
        used = 0
        for packed in reversed(dropped):
            line = self._record(packed)
            cost = self.env.tokenizer.count(line) + 1
            if used + cost > room:
                break
            lines.insert(0, line)
            used += cost
        return "\n".join(lines)

    def question_context(self, question: Question, budget: int) -> list[Message]:
        fixed = question_messages(question)
        limit = self.env.effective(budget)
        if self.history_fits(fixed, limit):
            return [*self.history, *fixed]
        units = self.reader_units()
        room = limit - self.env.count([memory_message(""), *fixed])
        kept, used, start = [], 0, len(units)
        for i in range(len(units) - 1, -1, -1):
            cost = self.env.tokenizer.count(units[i].raw) + 2
            if used + cost > room:
                break
            kept.insert(0, units[i].raw)
            used, start = used + cost, i
        if self.keeps_log and start > 0:
            log = self._log(units[:start], room - used - 4)
            if log:
                kept.insert(0, f"Log of earlier history:\n{log}")
        return [memory_message("\n\n".join(kept)), *fixed] if kept else fixed

    def fit_step(self, history: Sequence[Message], budget: int, limit: int) -> list[Message]:
        prefix, rest = split_prefix(history)
        steps = split_steps(rest)
        for keep in range(min(RECENT_STEPS, len(steps)), -1, -1):
            context = [*prefix, *mask_steps(steps, keep, self._masked)]
            if self.env.count(context) <= limit:
                return context
        units = self.agent_units(rest, budget)
        for drop in range(1, len(units)):
            kept_steps = split_steps([m for u in units[drop:] for m in u.messages])
            body = mask_steps(kept_steps, 0, self._masked)
            if not self.keeps_log:
                context = [*prefix, *body]
            else:
                room = limit - self.env.count([*prefix, memory_message(""), *body])
                log = self._log(units[:drop], room - 8)
                context = [*prefix, memory_message(f"Log of earlier steps:\n{log}"), *body] if log \
                    else [*prefix, *body]
            if self.env.count(context) <= limit:
                return context
        newest = mask_steps(split_steps(list(units[-1].messages)), 0, self._masked) if units else []
        return [*prefix, *fit_newest(self.env, prefix, newest, limit)]


class MaskingLog(Masking):
    """Observation masking plus a rule-written log of the steps that no longer fit."""

    name = "masking-log"
    keeps_log = True


def packed_kind(packed) -> str:
    """Agent units number their steps from 1; reader units have step 0."""
    return "agent" if packed.first_step else "reader"
