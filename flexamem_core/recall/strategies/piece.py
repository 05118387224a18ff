"""``mode="piece"``: the paper's piece recovery. The timeline keeps rho of the memory; the
best verbatim pieces of the whole history (BM25 fused with the pieces' cosines) fill the
rest, grouped by unit in time order."""

from __future__ import annotations

from ..assembly import MemoryRender
from ..piece_recovery import piece_recovery
from ..timeline import Timeline
from .base import Plan, RecallCall, RecoveryStrategy, Room
from .registry import register_strategy


@register_strategy
class PieceRecovery(RecoveryStrategy):
    """The best pieces after a timeline within its share."""

    name = "piece"

    def plan(self, call: RecallCall, room: Room) -> Plan:
        rho = call.cfg.tuning.timeline_share
        q = call.query

        def recover(timeline: Timeline) -> MemoryRender:
            return piece_recovery(call.notes, timeline, q.piece_text, q.vector, room.a_mem - timeline.total,
                                  room.allowance, call.index, call.tokenizer, call.cfg)

        return Plan(rho * room.size_mem, rho * room.a_mem if room.a_mem < room.size_mem else None, recover)
