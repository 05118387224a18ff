"""The memory of one call: the timeline sized by the strategy's plan, the detail it recovers,
and room recovery left given back to the trace.

The timeline is merged to the plan's target (sized by the larger reference allowance, so
merges recur call after call); when the newest unit is big, its oldest records make room
for recovery (``room_for``, per-call renders); to fit the allowance it is merged further,
and hidden only when even that cannot fit. Room recovery leaves unused goes back to the
timeline (fewer hidden or merged records), and recovery runs again, so the memory uses its
allowance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..index.namespace import NamespaceIndex
from ..model.protocols import RecordWriter, Tokenizer
from ..model.schema import Note
from .assembly import MemoryRender, memory_wrapper_tokens
from .revealed import Revealed, revealed_ledger
from .strategies.base import RecallCall, RecoveryStrategy, Room
from .timeline import Timeline, TimelineLevels

if TYPE_CHECKING:
    from ..config import FlexAMemConfig


class MemoryComposer:
    """Composes the memory of a call from the old units' notes with one recovery strategy."""

    def __init__(self, strategy: RecoveryStrategy, writer: RecordWriter, tokenizer: Tokenizer) -> None:
        self.strategy, self.writer, self.tokenizer = strategy, writer, tokenizer

    def compose(self, call: RecallCall, allowance: int, size_allowance: int) -> MemoryRender | None:
        """The memory within ``allowance`` tokens (the timeline sized by ``size_allowance``), or
        None when the allowance cannot hold the memory's wrapper."""
        wrapper = memory_wrapper_tokens(self.tokenizer)
        room = Room(allowance - wrapper, size_allowance - wrapper, allowance)
        if room.a_mem <= 0:
            return None
        revealed = self.revealed(call, room.a_mem)
        if revealed is not None:  # its room is set apart before the timeline is sized
            room = Room(room.a_mem - revealed.tokens, room.size_mem, allowance)
        plan = self.strategy.plan(call, room)
        timeline = self.fitted_timeline(call.index, call.cfg, call.notes, plan.target, room.a_mem, plan.room_for)
        if revealed is not None:  # chosen again in the room set apart, passing over what the records show
            revealed = self.revealed(call, revealed.tokens, shown=timeline.records_text()) or revealed
        timeline.revealed = revealed
        mem = plan.recover(timeline)
        calls = timeline.llm_calls
        unused = allowance - mem.tokens
        if unused > 0 and timeline.total < room.a_mem and (timeline.hidden_until or
                                                           any(it.level for it in timeline.items)):
            wider = self.fitted_timeline(call.index, call.cfg, call.notes, plan.target, room.a_mem,
                                         timeline.total + unused) if timeline.hidden_until else \
                self.fitted_timeline(call.index, call.cfg, call.notes, timeline.total + unused, room.a_mem)
            calls += wider.llm_calls
            wider.revealed = revealed
            if wider.total > timeline.total:
                again = plan.recover(wider)
                if mem.tokens <= again.tokens <= allowance:
                    mem = again
        mem.llm_calls += calls
        if plan.report is not None:
            mem.strategy_report = {**plan.report, **(mem.strategy_report or {})}  # what this recovery showed
        return mem

    def revealed(self, call: RecallCall, a_mem: int, shown: str | None = None) -> Revealed | None:
        """What old steps revealed, within ``revealed_share`` of the memory and ``revealed_tokens``
        (agent steps only); with ``shown`` (the records of the fitted timeline), within ``a_mem``
        tokens and not what ``shown`` says already."""
        tuning = call.cfg.tuning
        if call.question or tuning.revealed_share <= 0 or not call.notes:
            return None
        ledger = revealed_ledger(call.index, call.notes)
        room = min(int(tuning.revealed_share * a_mem), tuning.revealed_tokens) if shown is None else a_mem
        chosen = ledger.choose(len(call.notes), room, call.recent_text, call.fixed_text,
                               self.tokenizer, shown=shown or "")
        return chosen if chosen.by_unit else None

    def fitted_timeline(self, index: NamespaceIndex, cfg: FlexAMemConfig, notes: Sequence[Note], target: float,
                        a_mem: int, room_for: float | None = None) -> Timeline:
        """The timeline merged to ``target``; with ``room_for`` its oldest items hidden down to it
        (a big newest unit); then merged, not hidden, to fit ``a_mem``: the oldest items are
        hidden for room only if the fully merged timeline is still over it."""
        timeline = self.timeline(index, cfg, notes, target)
        if room_for is not None:
            timeline.hide_down_to(room_for, keep=1)
        if timeline.total > a_mem:
            timeline = self.timeline(index, cfg, notes, a_mem)
            timeline.hide_down_to(a_mem)
        return timeline

    def timeline(self, index: NamespaceIndex, cfg: FlexAMemConfig, notes: Sequence[Note], target: float) -> Timeline:
        """The timeline merged down to ``target``: incrementally when the old units are the
        index's first notes (the usual case), else from scratch."""
        if notes and index.is_prefix(notes[0].unit_key, notes[-1].unit_key, len(notes)):
            levels = index.derived.get("timeline")
            if levels is None or levels.writer is not self.writer or levels.fanin != cfg.tuning.merge_fanin:
                levels = index.derived["timeline"] = TimelineLevels(index, self.writer, self.tokenizer,
                                                                     cfg.tuning.merge_fanin)
            return levels.build(notes, target)
        timeline = Timeline(notes, index, self.writer, self.tokenizer, cfg.tuning.merge_fanin)
        timeline.merge_down_to(target)
        return timeline
