"""The ablations and the control of the evaluation, as recovery strategies.

Each changes one thing of the paper's unit recovery, so its effect is measured alone. They
are installed as ``flexamem.strategies`` entry points (``pyproject.toml``), so
``FlexAMemConfig(mode="timeline-only")`` works wherever this package is installed.
"""

from __future__ import annotations

import hashlib
import random

from flexamem_core.recall.candidates import Candidate
from flexamem_core.recall.strategies import RecallCall, unit


class TimelineOnly(unit.UnitRecovery):
    """Ablation: the timeline without any recovered detail."""

    name = "timeline-only"
    extends = False

    def candidates(self, call: RecallCall) -> list[Candidate]:
        return []


class NoExcerpts(unit.UnitRecovery):
    """Ablation: unit recovery with raw text or record only (no excerpts)."""

    name = "unit-no-excerpts"
    excerpts = False


class RandomCandidates(unit.UnitRecovery):
    """Control: every old unit a candidate, in an order seeded by a hash of the query's words."""

    name = "random-candidates"

    def candidates(self, call: RecallCall) -> list[Candidate]:
        n = len(call.notes)
        if n == 0:
            return []
        seed = int.from_bytes(hashlib.sha256(call.query.piece_text.encode("utf-8", "replace")).digest()[:8], "big")
        order = list(range(n))
        random.Random(seed).shuffle(order)
        return [Candidate(p, 0.0, "random") for p in order]

    def extension_candidates(self, call: RecallCall, shown: set[int]) -> list[Candidate]:
        return [c for c in self.candidates(call) if c.pos not in shown]
