"""FlexA-Mem and its ablations, run through the core's public API (``ingest``, ``render``).

All variants of one item share one store: the notes are written once (by whichever variant
runs first) and every variant reports that shared write cost. Variants differ only in the
config switches the core exposes: ``mode``, ``excerpts``, ``recovery``, ``random_candidates``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

from flexamem_core import FlexAMem, InMemoryStore, Message

from ..items import Question
from .base import Env, Method, WriteCost, warm_embedder

NAMESPACE = "item"


class _Ours(Method):
    @classmethod
    def warm(cls, env: Env) -> None:
        warm_embedder(env)

    #: Config switches per setting: ``reader`` (conversations) and ``agent`` (trajectories).
    switches: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mem: dict[str, FlexAMem] = {}
        self.cost = self.shared.setdefault("flexamem_write", WriteCost())  # one write cost for all of ours

    def memory(self, history_kind: str) -> FlexAMem:
        if history_kind not in self._mem:
            store = self.shared.setdefault(f"flexamem_store_{history_kind}", InMemoryStore())
            settings = {**self.switches.get(history_kind, {}), "history": history_kind}
            config = self.env.config.model_copy(update=settings)
            self._mem[history_kind] = FlexAMem(config, store=store, tokenizer=self.env.tokenizer,
                                               embedder=self.env.embedder)
        return self._mem[history_kind]

    def _ingest(self, mem: FlexAMem, history: Sequence[Message], final: bool) -> None:
        t0 = time.perf_counter()
        written = mem.ingest(history, namespace=NAMESPACE, final=final)
        if written:
            self.cost.ms += (time.perf_counter() - t0) * 1000
            self.cost.units += written
            notes = mem.store.notes(NAMESPACE)
            self.cost.llm_calls += sum(n.llm_calls for n in notes[-written:])

    def write(self, history: Sequence[Message]) -> None:
        super().write(history)
        self._ingest(self.memory("reader"), history, final=True)

    def question_context(self, question: Question, budget: int) -> list[Message]:
        return self.memory("reader").render_question(question.text, namespace=NAMESPACE, budget=budget).messages

    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        mem = self.memory("agent")
        self._ingest(mem, history, final=False)
        return mem.render(history, namespace=NAMESPACE, budget=budget).messages


class FlexAMemUnit(_Ours):
    """Unit recovery (the agent default)."""

    name = "flexamem-unit"
    switches: ClassVar = {"reader": {"mode": "unit"}, "agent": {"mode": "unit"}}


class FlexAMemUnitPerCall(_Ours):
    """Unit recovery rendered afresh on every call (the paper's rule, ``cache_stable=False``)."""

    name = "flexamem-unit-per-call"
    switches: ClassVar = {"reader": {"mode": "unit"}, "agent": {"mode": "unit", "cache_stable": False}}


class FlexAMemPiece(_Ours):
    """Piece recovery (the default for questions over a history)."""

    name = "flexamem-piece"
    switches: ClassVar = {"reader": {"mode": "piece"}, "agent": {"mode": "piece"}}


class TimelineOnly(_Ours):
    """Ablation: the timeline without any recovery."""

    name = "timeline-only"
    switches: ClassVar = {"reader": {"recovery": False}, "agent": {"recovery": False}}


class NoExcerpts(_Ours):
    """Ablation: unit recovery with raw text or record only (no excerpts)."""

    name = "flexamem-unit-no-excerpts"
    switches: ClassVar = {"reader": {"mode": "unit", "excerpts": False}, "agent": {"mode": "unit", "excerpts": False}}


class RandomCandidates(_Ours):
    """Control: every unit a candidate, in an order seeded by a hash of the query."""

    name = "random-candidates"
    switches: ClassVar = {"reader": {"mode": "unit", "random_candidates": True},
                          "agent": {"mode": "unit", "random_candidates": True}}
