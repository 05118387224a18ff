"""Retrieval without memory: BM25 over pieces, or units ranked by their best span embedding.

Both write no record. ``piece-retrieval`` ranks every piece (the core's pieces, at most
kappa tokens, never crossing a turn) with the core's BM25 (ties to cosine, then the earlier
piece) and shows the best pieces that fit, grouped by unit in time order with ``...`` for
omitted text, as the core renders recovered pieces. ``unit-retrieval`` ranks units by the
best cosine of their 150-token spans (the same pieces) and shows whole raw units, taken in
rank order while they fit, in time order. Agents keep the core's recent window.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from flexamem_core import Message
from flexamem_core.index.bm25 import BM25Index, content_words
from flexamem_core.index.embeddings import normalize as unit_norm
from flexamem_core.index.fusion import DenseRanking
from flexamem_core.model.schema import Piece, Unit
from flexamem_core.recall.joins import PIECES_HEADER, omission_join
from flexamem_core.recall.piece_walk import select_pieces
from flexamem_core.write.pieces import cut_pieces
from flexamem_core.write.units import unit_blocks

from ..items import Question
from .base import Env, Method, question_messages, warm_embedder
from .layout import agent_view, chain, fit, room_for_memory


class _PieceStore:
    """Pieces of units in write order, with a BM25 index that grows as units are added."""

    def __init__(self, method: Method) -> None:
        self.env = method.env
        self.bm25 = BM25Index(self.env.config.tuning.bm25_k1, self.env.config.tuning.bm25_b)
        self.pieces: list[Piece] = []
        self.unit_of_doc: list[int] = []
        self.units: list[Unit] = []
        self.position: dict[str, int] = {}
        self.unit_docs: list[range] = []
        self.vectors: dict[int, np.ndarray] = {}

    def add(self, units: Sequence[Unit]) -> int:
        """Cut and index units not seen yet; returns how many were added."""
        added = 0
        for unit in units:
            if unit.key in self.position:
                continue
            pieces = cut_pieces(unit.key, unit_blocks(unit), self.env.tokenizer, self.env.config.tuning.piece_tokens)
            self.position[unit.key] = len(self.units)
            self.units.append(unit)
            docs = self.bm25.add(p.text for p in pieces)
            self.unit_docs.append(docs)
            self.pieces.extend(pieces)
            self.unit_of_doc.extend(self.position[unit.key] for _ in pieces)
            added += 1
        return added

    def embed(self, docs: Sequence[int]) -> np.ndarray:
        missing = [d for d in docs if d not in self.vectors]
        if missing:
            for d, v in zip(missing, self.env.embedder.embed([self.pieces[d].text for d in missing]), strict=True):
                self.vectors[d] = v
        return np.stack([self.vectors[d] for d in docs]) if docs else np.zeros((0, 1), dtype=np.float32)

    def choose(self, query: str, allowed_units: set[int], room: int) -> list[int]:
        """Docs with a positive BM25 score taken best first while they fit ``room`` (each piece
        plus its joining newline); ties by cosine with the query, then position (the core's rule)."""
        scores = self.bm25.scores(content_words(query))
        hits = [d for d in np.flatnonzero(scores > 0).tolist() if self.unit_of_doc[d] in allowed_units]
        tokens = np.asarray([p.tokens + 1 for p in self.pieces], dtype=np.int64)
        q_vec: list[np.ndarray] = []

        def cosine(run: list[int]) -> np.ndarray:
            if not q_vec:
                q_vec.append(self.env.embedder.embed([query])[0])
            return self.embed(run) @ q_vec[0]

        return select_pieces(DenseRanking(np.asarray(hits, dtype=np.int64), scores), tokens, room, cosine)

    def render_pieces(self, docs: Sequence[int]) -> str:
        """Chosen pieces grouped by unit in time order, omitted text marked, as the core shows them."""
        if not docs:
            return ""
        by_unit: dict[int, list[Piece]] = {}
        for d in docs:
            by_unit.setdefault(self.unit_of_doc[d], []).append(self.pieces[d])
        out = [PIECES_HEADER]
        for pos in sorted(by_unit):
            unit = self.units[pos]
            ps = sorted(by_unit[pos], key=lambda p: p.index)
            out.append(f"== [{unit_label(unit)}] ==")
            out.append(omission_join(ps, len(self.unit_docs[pos])))
        return "\n".join(out)


def unit_label(unit: Unit) -> str:
    """Where a unit sits: its session and date, or its steps."""
    if unit.kind == "agent":
        steps = sum(1 for m in unit.messages if m.role == "assistant")
        return f"steps {unit.first_step}-{unit.first_step + max(steps, 1) - 1}"
    date = next((m.metadata.get("date") for m in unit.messages if m.metadata.get("date")), None)
    return f"{unit.session or 'session'}" + (f", {date}" if date else "")


def agent_query(env, view) -> np.ndarray:
    """The core's agent query: normalised sum of the embeddings of the task and the newest unit."""
    task = view.prefix[-1].text if view.prefix else ""
    newest = view.units[-1].raw if view.units else ""
    vecs = env.embedder.embed([task, newest])
    return unit_norm(vecs.sum(axis=0))


class _Retrieval(Method):
    @classmethod
    def warm(cls, env: Env) -> None:
        warm_embedder(env)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store = _PieceStore(self)
        self._pack_cache: dict = {}

    def write(self, history: Sequence[Message]) -> None:
        super().write(history)
        t0 = time.perf_counter()
        units = chain(self.reader_units(), "reader")
        self.cost.units += self.store.add(units)
        self._index_more()
        self.cost.ms += (time.perf_counter() - t0) * 1000

    def _index_more(self) -> None:
        """Extra indexing a subclass needs at write time."""

    def _agent_store(self, history: Sequence[Message], budget: int):
        view = agent_view(self.env, history, budget, self._pack_cache)
        t0 = time.perf_counter()
        added = self.store.add(view.old)
        if added:
            self._index_more()
            self.cost.ms += (time.perf_counter() - t0) * 1000
            self.cost.units += added
        return view


class PieceRetrieval(_Retrieval):
    """BM25 over pieces; the best pieces that fit, grouped by unit in time order."""

    name = "piece-retrieval"

    def question_context(self, question: Question, budget: int) -> list[Message]:
        fixed = question_messages(question)
        limit = self.env.effective(budget)
        if self.history_fits(fixed, limit):
            return [*self.history, *fixed]
        room = room_for_memory(self.env, [], fixed, limit)
        chosen = self.store.choose(question.text, set(range(len(self.store.units))), room)
        return fit(self.env, [], fixed, chosen, lambda ds: self.store.render_pieces(ds), limit)

    def fit_step(self, history: Sequence[Message], budget: int, limit: int) -> list[Message]:
        view = self._agent_store(history, budget)
        window = view.window
        room = room_for_memory(self.env, view.prefix, window, limit)
        allowed = {self.store.position[u.key] for u in view.old}
        query = "\n".join([view.prefix[-1].text if view.prefix else "", view.units[-1].raw if view.units else ""])
        chosen = self.store.choose(query, allowed, room)
        return fit(self.env, view.prefix, window, chosen, lambda ds: self.store.render_pieces(ds), limit)


class UnitRetrieval(_Retrieval):
    """Units ranked by the best cosine of their 150-token spans, shown raw while they fit."""

    name = "unit-retrieval"

    def _index_more(self) -> None:
        self.store.embed(range(len(self.store.pieces)))

    def _ranked_units(self, q_vec: np.ndarray, allowed: set[int]) -> list[int]:
        best: dict[int, float] = {}
        docs = [d for d in range(len(self.store.pieces)) if self.store.unit_of_doc[d] in allowed]
        if docs:
            cos = self.store.embed(docs) @ q_vec
            for d, c in zip(docs, cos.tolist(), strict=True):
                u = self.store.unit_of_doc[d]
                best[u] = max(best.get(u, -2.0), c)
        return sorted(best, key=lambda u: (-best[u], u))

    def _render(self, chosen: list[int]) -> str:
        return "\n\n".join(self.store.units[u].raw for u in sorted(chosen))

    def _take(self, ranked: list[int], room: int) -> list[int]:
        chosen, used = [], 0
        for u in ranked:
            t = self.store.units[u].tokens + 2
            if used + t <= room:
                chosen.append(u)
                used += t
        return chosen

    def question_context(self, question: Question, budget: int) -> list[Message]:
        fixed = question_messages(question)
        limit = self.env.effective(budget)
        if self.history_fits(fixed, limit):
            return [*self.history, *fixed]
        q_vec = self.env.embedder.embed([question.text])[0]
        ranked = self._ranked_units(q_vec, set(range(len(self.store.units))))
        chosen = self._take(ranked, room_for_memory(self.env, [], fixed, limit))
        return fit(self.env, [], fixed, chosen, self._render, limit)

    def fit_step(self, history: Sequence[Message], budget: int, limit: int) -> list[Message]:
        view = self._agent_store(history, budget)
        window = view.window
        allowed = {self.store.position[u.key] for u in view.old}
        ranked = self._ranked_units(agent_query(self.env, view), allowed)
        chosen = self._take(ranked, room_for_memory(self.env, view.prefix, window, limit))
        return fit(self.env, view.prefix, window, chosen, self._render, limit)
