"""The parts a user swaps: tokenizer, embedder, record writer and store.

Each is a small ``typing.Protocol``; the defaults live in their own modules
(``tokens``, ``embeddings``, ``writers``, ``stores.memory``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from .schema import MergedRecord, Note, Piece, Unit


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens; the same tokenizer measures every part of the context."""

    name: str

    def count(self, text: str) -> int: ...

    def split(self, text: str, max_tokens: int) -> list[str]:
        """Cut ``text`` into consecutive parts of at most ``max_tokens`` tokens each."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to unit-norm float32 vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class BackgroundEmbedder(Protocol):
    """Optional embedder capability: texts queued to be embedded on a background thread while
    the host waits for its model (``prefetch``: each input a callable returning texts, one
    embedding call each), and the vectors of texts already embedded read without waiting
    (``cached``: None unless every one is)."""

    def prefetch(self, *inputs: Callable[[], Sequence[str]]) -> None: ...

    def cached(self, texts: Sequence[str]) -> np.ndarray | None: ...


def as_background(embedder: object) -> BackgroundEmbedder | None:
    """The embedder if this instance offers both methods (looked up on the instance, as a
    wrapper may hide them), else None."""
    ok = callable(getattr(embedder, "prefetch", None)) and callable(getattr(embedder, "cached", None))
    return embedder if ok else None  # type: ignore[return-value]


@dataclass(frozen=True)
class WrittenRecord:
    """What a record writer returns for one unit."""

    record: str
    keywords: tuple[str, ...]
    tags: tuple[str, ...]
    description: str
    writer: str
    llm_calls: int = 0


@runtime_checkable
class RecordWriter(Protocol):
    """Writes the record and retrieval fields of a unit, and merged records."""

    name: str

    def write(self, unit: Unit) -> WrittenRecord: ...

    def merge(self, texts: Sequence[str]) -> tuple[str, int]:
        """Merge consecutive record texts into one; returns (text, llm_calls)."""
        ...


@runtime_checkable
class RequestStates(Protocol):
    """Optional store capability: one small blob per namespace holding the previous
    cache-stable request (:mod:`flexamem_core.cache.persisted`), so every process serving a
    thread continues the same prompt prefix. It may hold units' text (the memory message),
    so ``delete_unit`` and ``delete_namespace`` must delete it."""

    def get_request_state(self, namespace: str) -> bytes | None: ...

    def put_request_state(self, namespace: str, data: bytes) -> None: ...


@runtime_checkable
class PieceVectorFill(Protocol):
    """Optional store capability: a stored piece's own vector added after its unit was written.

    A piece's vector is derived data (the embedding of its text), so a long catch-up can
    write its units at once and their pieces' vectors after the call
    (:mod:`flexamem_core.render.piece_fill`). ``put_piece_vectors`` sets the vectors of the
    pieces of ``unit_key`` named by index that have none; a piece that has one keeps it, and a
    unit no longer stored (forgotten meanwhile) is skipped. Idempotent."""

    def put_piece_vectors(self, namespace: str, unit_key: str, vectors: Mapping[int, np.ndarray]) -> None: ...


@runtime_checkable
class Store(Protocol):
    """Append-only, namespaced storage of units, notes, pieces and memoised merges.

    ``write_unit`` stores a unit with its note and pieces atomically and is a no-op
    (returning False) when the unit's key is already stored. Nothing is ever updated in
    place; merged records are derived data and may be recomputed.
    """

    def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool: ...

    def has_unit(self, namespace: str, key: str) -> bool: ...

    def get_unit(self, namespace: str, key: str) -> Unit: ...

    def notes(self, namespace: str) -> list[Note]:
        """All notes of the namespace in write order."""
        ...

    def parents(self, namespace: str) -> dict[str, str | None]:
        """Unit key -> parent key, for every unit of the namespace."""
        ...

    def pieces(self, namespace: str, unit_key: str) -> list[Piece]: ...

    def iter_pieces(self, namespace: str) -> Iterable[Piece]:
        """Every piece of the namespace in write order (to build the BM25 index on open)."""
        ...

    def get_merged(self, namespace: str, key: str) -> MergedRecord | None: ...

    def put_merged(self, namespace: str, merged: MergedRecord) -> None: ...

    def namespaces(self) -> list[str]: ...
