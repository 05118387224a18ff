"""Per-namespace search state: note vectors, links, BM25 over pieces, memoised merges.

Everything here is derived from the store and rebuilt on open without re-embedding
(embeddings live in the notes); it then grows incrementally as units are written, so
no render rescans the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .arrays import GrowableArray
from .bm25 import BM25Index
from .protocols import Store
from .schema import MergedRecord, Note, Piece


def top_k(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, largest first, ties to the lower index.

    A partial selection (``np.partition``) finds the k-th value, so only the values at or
    above it are sorted: O(n), not O(n log n), as the index grows.
    """
    n = len(values)
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        kth = np.partition(values, n - k)[n - k]
        idx = np.flatnonzero(values >= kth)
    else:
        idx = np.arange(n)
    return idx[np.lexsort((idx, -values[idx]))][:k]


class NamespaceIndex:
    """Vectors, link graph and BM25 postings for one namespace of a store."""

    def __init__(self, store: Store, namespace: str, k1: float = 1.2, b: float = 0.75,
                 dim: int = 384) -> None:
        self.store = store
        self.namespace = namespace
        self.notes: list[Note] = []
        self.position: dict[str, int] = {}
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._n = 0
        self.back_links: dict[str, set[str]] = {}
        self.bm25 = BM25Index(k1, b)
        self.doc_unit: list[str] = []
        self.doc_piece: list[int] = []
        self._doc_tokens = GrowableArray(np.int64)
        #: Position (in ``notes``) of the unit of every piece document.
        self._doc_note = GrowableArray(np.int64)
        self.unit_docs: dict[str, range] = {}
        self.merged: dict[str, MergedRecord] = {}
        #: Timeline items already built, keyed by (start, end, last unit key[, writer]).
        self.timeline_items: dict[tuple[Any, ...], Any] = {}
        #: Per-process render state derived from the notes (the incremental timeline).
        self.derived: dict[str, Any] = {}
        self.load()

    def load(self) -> None:
        """Build from the store: notes (with their stored embeddings) and all pieces."""
        pieces_by_unit: dict[str, list[Piece]] = {}
        for p in self.store.iter_pieces(self.namespace):
            pieces_by_unit.setdefault(p.unit_key, []).append(p)
        for note in self.store.notes(self.namespace):
            self.add(note, pieces_by_unit.get(note.unit_key, []))

    def add(self, note: Note, pieces: Sequence[Piece]) -> None:
        """Index a newly written note and its pieces."""
        if note.unit_key in self.position:
            return
        vec = np.asarray(note.embedding, dtype=np.float32).reshape(-1)
        if self._vectors.shape[1] != vec.shape[0]:
            if self._n:
                raise ValueError(f"embedding dimension {vec.shape[0]} != index dimension "
                                 f"{self._vectors.shape[1]} in namespace {self.namespace!r}")
            self._vectors = np.zeros((0, vec.shape[0]), dtype=np.float32)
        if self._n == len(self._vectors):
            grown = np.zeros((max(64, 2 * self._n), vec.shape[0]), dtype=np.float32)
            grown[: self._n] = self._vectors[: self._n]
            self._vectors = grown
        self._vectors[self._n] = vec
        self._n += 1
        self.position[note.unit_key] = len(self.notes)
        self.notes.append(note)
        for target in note.links:
            self.back_links.setdefault(target, set()).add(note.unit_key)
        docs = self.bm25.add(p.text for p in pieces)
        self.unit_docs[note.unit_key] = docs
        self.doc_unit.extend(note.unit_key for _ in pieces)
        self.doc_piece.extend(p.index for p in pieces)
        self._doc_tokens.extend(p.tokens for p in pieces)
        self._doc_note.extend(self.position[note.unit_key] for _ in pieces)

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors[: self._n]

    def note(self, key: str) -> Note:
        return self.notes[self.position[key]]

    def is_prefix(self, first: str, last: str, n: int) -> bool:
        """Whether a chain of ``n`` units from ``first`` to ``last`` is exactly the first ``n``
        notes written (the usual old units). A chain's positions only increase (a unit is
        written after its parent), so ``first`` at 0 and ``last`` at ``n - 1`` mean all of them."""
        return n > 0 and self.position.get(first) == 0 and self.position.get(last) == n - 1

    def notes_of(self, keys: Sequence[str]) -> Sequence[Note]:
        """The notes of a chain of unit keys: a slice in the usual prefix case."""
        if keys and self.is_prefix(keys[0], keys[-1], len(keys)):
            return self.notes[:len(keys)]
        return [self.note(k) for k in keys]

    def nearest(self, vec: np.ndarray, k: int) -> list[str]:
        """Keys of the ``k`` notes with the highest cosine to ``vec`` (ties: earlier first)."""
        if k <= 0 or self._n == 0:
            return []
        return [self.notes[int(i)].unit_key for i in top_k(self.vectors @ vec, k)]

    def links_of(self, key: str) -> set[str]:
        """Both directions of the links of a note."""
        out = set(self.back_links.get(key, ()))
        if key in self.position:
            out.update(self.note(key).links)
        return out

    def doc_tokens_array(self) -> np.ndarray:
        """Token count of every piece document."""
        return self._doc_tokens.view

    def doc_note_array(self) -> np.ndarray:
        """Position in ``notes`` of the unit of every piece document."""
        return self._doc_note.view

    def piece_cosines(self, docs: Sequence[int], q_vec: np.ndarray) -> np.ndarray:
        """Cosine of each piece's unit (its stored note vector) with the query: no model call."""
        rows = self.doc_note_array()[np.asarray(docs, dtype=np.int64)]
        return self.vectors[rows] @ q_vec

    def get_merged(self, key: str) -> MergedRecord | None:
        found = self.merged.get(key)
        if found is None:
            found = self.store.get_merged(self.namespace, key)
            if found is not None:
                self.merged[key] = found
        return found

    def put_merged(self, merged: MergedRecord) -> None:
        self.merged[merged.key] = merged
        self.store.put_merged(self.namespace, merged)
