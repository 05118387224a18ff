"""Shared layout of a baseline's context: units of the history, recent window, fitting.

Agents: ``[system, task] + memory + recent window`` where the window is the core's
(longest run of newest units within a quarter of the budget, always the newest unit).
Readers: ``memory + question``. Memory text is shown in one ``<memory>`` message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from flexamem_core import Message
from flexamem_core.model.schema import Unit
from flexamem_core.request.cuts import fit_messages
from flexamem_core.request.layout import recent_window
from flexamem_core.write.units import PackedUnit, to_unit

from .base import Env, memory_message, split_prefix

T = TypeVar("T")


def chain(packed: Sequence[PackedUnit], kind: str) -> list[Unit]:
    """Give packed units their content keys, each the parent of the next (as the core stores them)."""
    out: list[Unit] = []
    parent = None
    for p in packed:
        unit = to_unit(p, kind, parent)  # type: ignore[arg-type]
        out.append(unit)
        parent = unit.key
    return out


@dataclass(frozen=True)
class AgentView:
    """An agent history split into the fixed prompt, old units and the recent window."""

    prefix: list[Message]
    units: list[Unit]
    window_start: int

    @property
    def old(self) -> list[Unit]:
        return self.units[: self.window_start]

    @property
    def window(self) -> list[Message]:
        return [m for u in self.units[self.window_start:] for m in u.messages]


def agent_view(env: Env, history: Sequence[Message], budget: int, units_cache: dict) -> AgentView:
    """Split a history at a budget; units are cached by their messages' identity."""
    prefix, rest = split_prefix(history)
    packed = env_pack(env, rest, units_cache, env.agent_unit_tokens(budget))
    units = chain(packed, "agent")
    n = recent_window([u.tokens for u in units], budget * env.config.tuning.window_share)
    return AgentView(prefix, units, len(units) - n)


def env_pack(env: Env, rest: Sequence[Message], cache: dict, unit_tokens: int) -> list[PackedUnit]:
    from flexamem_core.write.units import pack_units

    key = (len(rest), id(rest[-1]) if rest else None, unit_tokens)
    if key not in cache:
        cache.clear()
        cache[key] = pack_units(rest, "agent", env.tokenizer, unit_tokens)
    return cache[key]


def fit(env: Env, before: Sequence[Message], after: Sequence[Message], chosen: list[T],
        render: Callable[[list[T]], str], limit: int) -> list[Message]:
    """``before + memory(render(chosen)) + after``, dropping the last chosen items until it fits.

    When even ``before + after`` is over (the newest unit alone exceeds the budget), the
    largest outputs in ``after`` are cut in the middle as the core cuts them.
    """
    while True:
        text = render(chosen)
        context = [*before, memory_message(text), *after] if text else [*before, *after]
        if env.count(context) <= limit:
            return context
        if not chosen:
            return [*before, *fit_newest(env, before, after, limit)]
        # Drop several at once when far over, one at a time when close.
        over = env.count(context) - limit
        drop = max(1, min(len(chosen) // 4, over // 200))
        del chosen[len(chosen) - drop:]


def fit_newest(env: Env, before: Sequence[Message], after: Sequence[Message], limit: int) -> list[Message]:
    """The core's rule for a newest unit larger than the budget: cut its largest outputs."""
    cut, _ = fit_messages(after, max(1, limit - env.count(before)), env.tokenizer)
    return cut


def room_for_memory(env: Env, before: Sequence[Message], after: Sequence[Message], limit: int) -> int:
    """Tokens left for the memory text once the other messages and the memory wrapper are counted."""
    return limit - env.count([*before, memory_message(""), *after])
