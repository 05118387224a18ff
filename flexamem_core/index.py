"""Per-namespace search state: note vectors, links, BM25 over pieces, memoised merges.

Everything here is derived from the store and rebuilt on open without re-embedding
(embeddings live in the notes); it then grows incrementally as units are written, so
no render rescans the history.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .bm25 import BM25Index
from .protocols import Embedder, Store
from .schema import MergedRecord, Note, Piece


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
        self.doc_tokens: list[int] = []
        self.unit_docs: dict[str, range] = {}
        self.piece_vectors: dict[tuple[str, int], np.ndarray] = {}
        self.merged: dict[str, MergedRecord] = {}
        #: Timeline items already built, keyed by (start, end, last unit key[, writer]).
        self.timeline_items: dict[tuple[Any, ...], Any] = {}
        self._doc_tokens_array = np.zeros(0, dtype=np.int64)
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
        self.doc_tokens.extend(p.tokens for p in pieces)

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors[: self._n]

    def note(self, key: str) -> Note:
        return self.notes[self.position[key]]

    def nearest(self, vec: np.ndarray, k: int, among: Sequence[str] | None = None) -> list[str]:
        """Keys of the ``k`` notes with the highest cosine to ``vec`` (ties: earlier first)."""
        if k <= 0 or self._n == 0:
            return []
        if among is None:
            idx = np.arange(self._n)
        else:
            idx = np.asarray([self.position[key] for key in among if key in self.position], dtype=np.int64)
            if idx.size == 0:
                return []
        sims = self.vectors[idx] @ vec
        order = np.lexsort((idx, -sims))[:k]
        return [self.notes[int(idx[i])].unit_key for i in order]

    def links_of(self, key: str) -> set[str]:
        """Both directions of the links of a note."""
        out = set(self.back_links.get(key, ()))
        if key in self.position:
            out.update(self.note(key).links)
        return out

    def doc_tokens_array(self) -> np.ndarray:
        if len(self._doc_tokens_array) < len(self.doc_tokens):
            self._doc_tokens_array = np.asarray(self.doc_tokens, dtype=np.int64)
        return self._doc_tokens_array

    def piece_embeddings(self, docs: Iterable[int], embedder: Embedder) -> dict[int, np.ndarray]:
        """Embeddings of the given pieces, computed on first need and kept."""
        docs = list(docs)
        missing = [d for d in docs if (self.doc_unit[d], self.doc_piece[d]) not in self.piece_vectors]
        if missing:
            by_unit: dict[str, list[int]] = {}
            for d in missing:
                by_unit.setdefault(self.doc_unit[d], []).append(d)
            texts, keys = [], []
            for unit_key, ds in by_unit.items():
                plist = self.store.pieces(self.namespace, unit_key)
                for d in ds:
                    texts.append(plist[self.doc_piece[d]].text)
                    keys.append((unit_key, self.doc_piece[d]))
            for key, vec in zip(keys, embedder.embed(texts)):
                self.piece_vectors[key] = vec
        return {d: self.piece_vectors[(self.doc_unit[d], self.doc_piece[d])] for d in docs}

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
