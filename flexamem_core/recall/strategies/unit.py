"""``mode="unit"``: the paper's unit recovery. Candidate units (seeds, their links and time
neighbours) in decreasing score, each shown at the highest resolution that fits: raw text,
an excerpt of its best pieces, or its record (fit-or-degrade). What a human turn or
``query=`` asks puts the unit with its best lexical match first."""

from __future__ import annotations

from ..assembly import MemoryRender
from ..candidates import Candidate, candidates, excerpt_scores, focus_first
from ..timeline import Timeline
from ..unit_recovery import fit_or_degrade, unit_recovery
from .base import Extension, Plan, RecallCall, RecoveryStrategy, Room
from .registry import register_strategy


@register_strategy
class UnitRecovery(RecoveryStrategy):
    """Fit-or-degrade over the paper's candidates. Subclasses change :meth:`candidates`,
    :meth:`extension_candidates` or ``excerpts`` (False: raw text or record only)."""

    name = "unit"
    excerpts = True
    extends = True

    def candidates(self, call: RecallCall) -> list[Candidate]:
        """The units to visit, best first (a focus match first)."""
        q, index = call.query, call.index
        cands = candidates(q.vector, call.notes, index, call.cfg, q.piece_text)
        if cands and q.focus:  # what was asked: its best match first
            cands = focus_first(cands, call.notes, index, index.bm25.query_terms(q.focus, call.cfg.tuning.query_terms))
        return cands

    def extension_candidates(self, call: RecallCall, shown: set[int]) -> list[Candidate]:
        """The units an extended memory may recover, best first, those already shown left out."""
        q = call.query
        return [c for c in candidates(q.vector, call.notes, call.index, call.cfg, q.piece_text) if c.pos not in shown]

    def plan(self, call: RecallCall, room: Room) -> Plan:
        notes, index, cfg = call.notes, call.index, call.cfg
        cands = self.candidates(call)
        d = sum(max(0, n.raw_tokens - n.record_tokens) for n in (notes[c.pos] for c in cands))
        target = max(cfg.tuning.timeline_share * room.size_mem, room.size_mem - d)
        # the newest unit is big: the oldest records make room for recovery, this call only
        # (a recovered unit whose record is hidden is shown after the mark). A stable
        # request keeps its trace: it only hides what cannot fit.
        room_for = max(cfg.tuning.timeline_share * room.a_mem, room.a_mem - d) \
            if room.a_mem < room.size_mem and not call.stable else None
        ranges = [index.unit_docs.get(notes[c.pos].unit_key, range(0)) for c in cands]
        scores = excerpt_scores(index, ranges, call.query.excerpt_text, call.query.vector, cfg)

        def recover(timeline: Timeline) -> MemoryRender:
            return unit_recovery(notes, timeline, cands, room.a_mem - timeline.total, room.allowance, index, cfg,
                                 call.tokenizer, scores, in_place_detail=not call.stable, excerpts=self.excerpts)

        return Plan(target, room_for, recover)

    def extend(self, call: RecallCall, room: int, shown: set[int]) -> Extension:
        index, cfg = call.index, call.cfg
        cands = self.extension_candidates(call, shown)
        ranges = [index.unit_docs.get(call.notes[c.pos].unit_key, range(0)) for c in cands]
        scores = index.bm25.scores_in(index.bm25.query_terms(call.query.excerpt_text, cfg.tuning.query_terms), ranges)
        return Extension(fit_or_degrade(call.notes, cands, room, index, cfg, call.tokenizer, scores, lambda pos: 0,
                                        self.excerpts))
