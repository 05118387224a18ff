"""FlexA-Mem and its ablations, run through the core's public API (``ingest``, ``render``).

The notes of one history are written once, whichever variant and budget runs first, and
every variant reports that one write cost. Conversations are ingested whole before any
question, so all variants share one store. A trajectory is ingested call by call, and a
store holding units the current call has not reached yet is not what a live agent has (the
index statistics, e.g. BM25's document frequencies, would include them), so each variant
and budget keeps its own store, filled as its calls go, while the expensive part of a note
is made once per history and shared: its record and fields (:class:`SharedRecords`) and
its vectors (the embedder's cache). Variants differ only in their config: the recovery
strategy (``mode``, the ablations among them: :mod:`flexamem_eval.strategies`) and
``cache_stable``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar

from flexamem_core import FlexAMem, FlexAMemConfig, InMemoryStore, Message, RuleRecordWriter
from flexamem_core.host import config_for_budget
from flexamem_core.model.protocols import WrittenRecord
from flexamem_core.model.schema import Unit

from ..items import Question
from .base import Env, Method, WriteCost, warm_embedder

NAMESPACE = "item"


class SharedRecords:
    """A record writer that writes each unit's record once and hands the same record to
    every memory of the history (the rule writer's output depends on the unit alone)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self._records: dict[tuple[str, int], WrittenRecord] = {}
        self._merged: dict[tuple[str, ...], tuple[str, int]] = {}

    def write(self, unit: Unit) -> WrittenRecord:
        key = (unit.key, unit.first_step)
        rec = self._records.get(key)
        if rec is None:
            rec = self._records[key] = self.inner.write(unit)
        return rec

    def merge(self, texts: Sequence[str]) -> tuple[str, int]:
        key = tuple(texts)
        out = self._merged.get(key)
        if out is None:
            out = self._merged[key] = self.inner.merge(texts)
        return out


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

    def memory(self, history_kind: str, budget: int | None = None) -> FlexAMem:
        """The memory of one history kind. Readers: one store per history, shared by every
        budget; agents: one per instance (a variant at ``budget``), configured as an adapter
        configures it for that budget (:func:`flexamem_core.host.config_for_budget`)."""
        if history_kind not in self._mem:
            store = self.shared.setdefault("flexamem_store_reader", InMemoryStore()) \
                if history_kind == "reader" else InMemoryStore()
            settings = {**self.switches.get(history_kind, {}), "history": history_kind}
            config = FlexAMemConfig(**{**self.env.config.model_dump(exclude_unset=True), **settings})  # validated
            if history_kind == "agent" and budget is not None:
                config = config_for_budget(budget, config)
            writer = self.shared.setdefault(
                ("flexamem_records", config.tuning.record_words, config.tuning.merged_record_words),
                SharedRecords(RuleRecordWriter(config.tuning.record_words, config.tuning.merged_record_words)))
            self._mem[history_kind] = FlexAMem(config, store=store, tokenizer=self.env.tokenizer,
                                               embedder=self.env.embedder, writer=writer)
        return self._mem[history_kind]

    def _ingest(self, mem: FlexAMem, history: Sequence[Message], final: bool) -> None:
        t0 = time.perf_counter()
        written = mem.ingest(history, namespace=NAMESPACE, final=final)
        if written:
            seen: set[str] = self.shared.setdefault("flexamem_written", set())
            notes = [n for n in mem.store.notes(NAMESPACE)[-written:] if n.unit_key not in seen]
            if notes:  # the first memory of the history to write these units pays for them
                self.cost.ms += (time.perf_counter() - t0) * 1000
                self.cost.units += len(notes)
                self.cost.llm_calls += sum(n.llm_calls for n in notes)
                seen.update(n.unit_key for n in notes)

    def write(self, history: Sequence[Message]) -> None:
        super().write(history)
        self._ingest(self.memory("reader"), history, final=True)

    def question_context(self, question: Question, budget: int) -> list[Message]:
        return self.memory("reader").render_question(question.text, namespace=NAMESPACE, budget=budget).messages

    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        mem = self.memory("agent", budget)
        self._ingest(mem, history, final=False)
        return mem.render(history, namespace=NAMESPACE, budget=budget).messages


class FlexAMemAuto(_Ours):
    """The automatic mode (``mode="auto"``), the core's and every adapter's default."""

    name = "flexamem-auto"
    switches: ClassVar = {"reader": {"mode": "auto"}, "agent": {"mode": "auto"}}



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
    switches: ClassVar = {"reader": {"mode": "timeline-only"}, "agent": {"mode": "timeline-only"}}


class NoExcerpts(_Ours):
    """Ablation: unit recovery with raw text or record only (no excerpts)."""

    name = "flexamem-unit-no-excerpts"
    switches: ClassVar = {"reader": {"mode": "unit-no-excerpts"}, "agent": {"mode": "unit-no-excerpts"}}


class RandomCandidates(_Ours):
    """Control: every unit a candidate, in an order seeded by a hash of the query."""

    name = "random-candidates"
    switches: ClassVar = {"reader": {"mode": "random-candidates"}, "agent": {"mode": "random-candidates"}}


def strategy_method(mode: str) -> type[_Ours]:
    """The method that runs the registered recovery strategy ``mode``, as ``flexamem-<mode>``."""
    return type(f"Strategy_{mode}", (_Ours,), {
        "__doc__": f"The recovery strategy {mode!r} (registered with the core).",
        "__module__": __name__, "name": f"flexamem-{mode}",
        "switches": {"reader": {"mode": mode}, "agent": {"mode": mode}}})
