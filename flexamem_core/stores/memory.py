"""In-memory store: the reference backend for tests and throwaway runs."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..model.schema import MergedRecord, Note, Piece, Unit
from .codec import check_write, fill_vectors
from .forgetting import merged_covering
from .names import check_namespace


@dataclass
class _Space:
    units: dict[str, Unit] = field(default_factory=dict)
    notes: dict[str, Note] = field(default_factory=dict)
    pieces: dict[str, list[Piece]] = field(default_factory=dict)
    merged: dict[str, MergedRecord] = field(default_factory=dict)
    index_snapshot: bytes | None = None
    request_state: bytes | None = None
    version: int = 0


MEMORY_SCHEME = "memory"


class InMemoryStore:
    """Append-only dict-backed store; dict insertion order is the write order.

    Its ``url`` (``memory://<id>``) reopens this very object in this process
    (``open_store``); nothing survives the process.
    """

    def __init__(self, *, store_id: str | None = None) -> None:
        self._spaces: dict[str, _Space] = {}
        self._lock = threading.Lock()
        self.store_id = store_id or uuid.uuid4().hex
        self._changes = 0  # store-wide, so a namespace recreated after deletion never repeats a version

    @property
    def url(self) -> str:
        return f"{MEMORY_SCHEME}://{self.store_id}"

    def _space(self, namespace: str) -> _Space:
        check_namespace(namespace)
        space = self._spaces.get(namespace)
        if space is None:
            space = self._spaces.setdefault(namespace, _Space())
        return space

    def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool:
        pieces = check_write(unit, note, pieces)
        with self._lock:
            space = self._space(namespace)
            if unit.key in space.units:
                return False
            space.units[unit.key] = unit
            space.notes[unit.key] = note
            space.pieces[unit.key] = list(pieces)
            self._changed(space)
            return True

    def put_piece_vectors(self, namespace: str, unit_key: str, vectors: Mapping[int, np.ndarray]) -> None:
        """Fill the own vectors of a unit's pieces that have none (``PieceVectorFill``)."""
        rows = fill_vectors(vectors)
        with self._lock:
            plist = self._space(namespace).pieces.get(unit_key)
            for i, p in enumerate(plist or ()):
                if p.embedding is None and p.index in rows:
                    plist[i] = dataclasses.replace(p, embedding=rows[p.index])

    def _changed(self, space: _Space) -> None:
        self._changes += 1
        space.version = self._changes

    def namespace_version(self, namespace: str) -> str:
        space = self._spaces.get(check_namespace(namespace))
        return str(space.version if space is not None else 0)

    def has_unit(self, namespace: str, key: str) -> bool:
        return key in self._space(namespace).units

    def get_unit(self, namespace: str, key: str) -> Unit:
        try:
            return self._space(namespace).units[key]
        except KeyError:
            raise KeyError(f"no unit {key!r} in namespace {namespace!r}") from None

    def notes(self, namespace: str) -> list[Note]:
        return list(self._space(namespace).notes.values())

    def parents(self, namespace: str) -> dict[str, str | None]:
        return {k: u.parent for k, u in self._space(namespace).units.items()}

    def pieces(self, namespace: str, unit_key: str) -> list[Piece]:
        return list(self._space(namespace).pieces.get(unit_key, ()))

    def iter_pieces(self, namespace: str) -> Iterable[Piece]:
        for plist in list(self._space(namespace).pieces.values()):
            yield from plist

    def get_merged(self, namespace: str, key: str) -> MergedRecord | None:
        return self._space(namespace).merged.get(key)

    def put_merged(self, namespace: str, merged: MergedRecord) -> None:
        with self._lock:
            space = self._space(namespace)
            if all(k in space.units or k in space.merged for k in merged.covers):
                space.merged.setdefault(merged.key, merged)  # else: a covered unit was deleted

    def merged_records(self, namespace: str) -> list[MergedRecord]:
        return list(self._space(namespace).merged.values())

    def get_index_snapshot(self, namespace: str) -> bytes | None:
        return self._space(namespace).index_snapshot

    def put_index_snapshot(self, namespace: str, data: bytes) -> None:
        with self._lock:
            self._space(namespace).index_snapshot = bytes(data)

    def get_request_state(self, namespace: str) -> bytes | None:
        return self._space(namespace).request_state

    def put_request_state(self, namespace: str, data: bytes) -> None:
        with self._lock:
            self._space(namespace).request_state = bytes(data)

    def namespaces(self) -> list[str]:
        return [ns for ns, s in self._spaces.items() if s.units]

    def delete_unit(self, namespace: str, key: str) -> bool:
        """Forget a unit: its note, pieces, the links to it and merged records covering it."""
        with self._lock:
            space = self._space(namespace)
            if space.units.pop(key, None) is None:
                return False
            space.notes.pop(key, None)
            space.pieces.pop(key, None)
            space.index_snapshot = None
            space.request_state = None
            self._changed(space)
            for k, note in space.notes.items():
                if key in note.links:
                    space.notes[k] = dataclasses.replace(
                        note, links=tuple(x for x in note.links if x != key))
            covers = {k: m.covers for k, m in space.merged.items()}
            for k in merged_covering(covers, [key]):
                del space.merged[k]
            return True

    def delete_namespace(self, namespace: str) -> int:
        """Forget a whole namespace; returns the number of units it held."""
        with self._lock:
            check_namespace(namespace)
            space = self._spaces.pop(namespace, None)
            return len(space.units) if space else 0
