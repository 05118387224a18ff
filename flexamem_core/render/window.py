"""The recent window of a call and what else follows the memory: the newest units verbatim
(agents: the longest run of newest units within ``window_share`` of the budget; a chat: its
open unit), the newest human turn pinned when its unit left the window, and both fitted to
the room left when the newest unit alone is over it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..config import FlexAMemConfig
from ..model.messages import Message
from ..model.protocols import Tokenizer
from ..model.schema import Unit
from ..request.counting import count_messages
from ..request.cuts import fit_messages
from ..request.layout import recent_window
from ..write.units import PackedUnit, split_steps
from .state import NamespaceState

#: The least a cut pinned user turn keeps (head, mark and tail).
PINNED_MIN_TOKENS = 64


class _Chained(Sequence[Unit | PackedUnit]):
    """The stored units followed by the open one, if any, without copying the stored list."""

    def __init__(self, units: Sequence[Unit], tail: PackedUnit | None) -> None:
        self.units, self.tail = units, tail

    def __len__(self) -> int:
        return len(self.units) + (self.tail is not None)

    def __getitem__(self, i):  # type: ignore[no-untyped-def,override]  # positions only: no slice is taken
        if i < 0:
            i += len(self)
        if self.tail is not None and i == len(self.units):
            return self.tail
        return self.units[i]

    def newest(self, n: int) -> list[Unit | PackedUnit]:
        """The newest ``n`` units, oldest first."""
        if n <= 0:
            return []
        if self.tail is None:
            return list(self.units[len(self.units) - n:])
        return [*self.units[len(self.units) - n + 1:], self.tail]


def _newest_sizes(units: Sequence[Unit | PackedUnit], tk: Tokenizer, limit: float) -> list[int]:
    """Token sizes of the newest units, oldest first, only as far back as the window can reach."""
    sizes: list[int] = []
    used = 0
    for u in reversed(units):
        size = count_messages(u.messages, tk) - 3
        sizes.append(size)
        used += size
        if used > limit:
            break
    return sizes[::-1]


def agent_window(units: Sequence[Unit], tail: PackedUnit | None, cfg: FlexAMemConfig,
                 tk: Tokenizer) -> tuple[list[Unit | PackedUnit], list[Unit]]:
    """Agents: the window (the longest run of newest units within ``window_share * B``, the
    open unit included) and the old units before it."""
    all_units = _Chained(units, tail)
    limit = cfg.tuning.window_share * cfg.budget
    n_win = recent_window(_newest_sizes(all_units, tk, limit), limit) if len(all_units) else 0
    return all_units.newest(n_win), list(units[: len(all_units) - n_win])


@dataclass
class FittedTail:
    """What follows the memory, fitted: the pinned turn and the window, with their cuts."""

    pinned: list[Message]
    pinned_cut: int
    window: list[Message]
    cut: int
    dropped: int
    #: Tokens of the window as fitted, and the room it had.
    used: int
    room: int


def fit_tail(pinned: list[Message], window: list[Message], room: int, pinned_cap: int, tk: Tokenizer,
             chat: bool = False) -> FittedTail:
    """The pinned turn cut to ``pinned_cap``, then the window fitted to the room left."""
    n_pinned_cut = 0
    if pinned and count_messages(pinned, tk) - 3 > pinned_cap:
        pinned, n_pinned_cut = fit_messages(pinned, pinned_cap, tk)
    room_for_window = room - (count_messages(pinned, tk) - 3 if pinned else 0)
    n_cut = n_dropped = 0
    if window and count_messages(window, tk) - 3 > room_for_window:
        window, n_cut, n_dropped = fit_window(window, room_for_window, tk, chat)
    used = count_messages(window, tk) - 3 if window else 0
    return FittedTail(pinned, n_pinned_cut, window, n_cut, n_dropped, used, room_for_window)


def fit_pinned_and_window(pinned: list[Message], window: list[Message], room: int, cfg: FlexAMemConfig,
                          tk: Tokenizer, chat: bool) -> FittedTail:
    """A human turn over the window's share is cut like any oversized message; down to its
    bones if the newest unit needs the room (the newest step comes first)."""
    fitted = fit_tail(pinned, window, room, max(PINNED_MIN_TOKENS, int(cfg.tuning.window_share * cfg.budget)), tk, chat)
    if pinned and fitted.used > fitted.room:
        fitted = fit_tail(pinned, window, room, PINNED_MIN_TOKENS, tk, chat)
    return fitted


def fit_window(window: list[Message], room: int, tk: Tokenizer, chat: bool = False) -> tuple[list[Message], int, int]:
    """The newest unit alone over the budget: cut its largest outputs (marked); if that is
    not enough, leave out its oldest whole steps (never the newest) for this call."""
    steps = split_steps(window)
    dropped = 0
    while True:
        msgs = [m for s in steps for m in s]
        fitted, n_cut = fit_messages(msgs, room, tk, outputs_first=not chat)
        if count_messages(fitted, tk) - 3 <= room or len(steps) == 1:
            return fitted, n_cut, dropped
        steps = steps[1:]
        dropped += 1


def pinned_turn(state: NamespaceState, n_old: int, window: Sequence[Message], kind: str,
                cfg: FlexAMemConfig) -> list[Message]:
    """Agents: the newest user turn stays visible even when its unit left the window.

    ``kind`` is how this call reads the history: a question over a stored agent history is a
    reader's call, so no old turn is pinned before it."""
    if kind != "agent" or not cfg.pin_user_turn or not n_old:
        return []
    if any(m.role == "user" for m in window):
        return []
    turn = state.newest_user_turn(n_old)
    return [turn] if turn is not None else []
