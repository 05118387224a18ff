"""A FlexA-Mem :class:`~flexamem_core.model.protocols.Store` kept in a LangGraph ``BaseStore``.

A LangGraph deployment already runs a store (``InMemoryStore``, ``PostgresStore``, the
platform store); this backend keeps FlexA-Mem's units, notes, pieces and merged records
there as JSON items, so memory lives wherever the deployment keeps its data.

Layout: for FlexA-Mem namespace ``ns`` the items live under
``(*prefix, label(ns), kind)`` with ``kind`` one of ``units``, ``notes``, ``pieces``,
``merged`` and the unit key (or merge key) as item key. ``label`` escapes ``.``, which
LangGraph namespace labels may not contain. Every unit write is one ``batch`` of puts with
the note last, so ``notes()`` never lists a unit that was only partly written, and every
item carries a write sequence number that gives the write order back (BaseStore search
order is backend-defined). Items are written with ``index=False``: FlexA-Mem computes its
own embeddings, the store's vector index is not used.

On a store over a ``sqlite3`` connection (langgraph's ``SqliteStore``) the adapter turns on
``secure_delete`` and, in WAL mode, truncates the WAL after each deletion, so forgotten text
leaves the database file too, whatever the SQLite build's defaults.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.store.base import BaseStore, PutOp

from flexamem_core.model.schema import MergedRecord, Note, Piece, Unit
from flexamem_core.stores import check_namespace
from flexamem_core.stores.codec import check_write, restored, storable
from flexamem_core.stores.forgetting import merged_covering

_PAGE = 500


def _label(namespace: str) -> str:
    return check_namespace(namespace).replace(".", "%2E")


def _unlabel(label: str) -> str:
    return label.replace("%2E", ".")


def _sqlite_connection(store: BaseStore) -> sqlite3.Connection | None:
    """The ``sqlite3`` connection a store (langgraph's ``SqliteStore``) runs on, if any."""
    conn = getattr(store, "conn", None)
    return conn if isinstance(conn, sqlite3.Connection) else None


class LangGraphBaseStore:
    """FlexA-Mem store backend on any LangGraph ``BaseStore``.

    Not transactional across processes: two workers writing the same unit at once both
    write identical content (keys are content hashes) and both report it written, and the
    order of concurrent writers comes from each process's clock. Use one writer per namespace.
    """

    def __init__(self, store: BaseStore, prefix: Sequence[str] = ("flexamem",)) -> None:
        if not isinstance(store, BaseStore):
            raise TypeError(f"store must be a langgraph BaseStore, got {type(store).__name__}")
        prefix = tuple(prefix)
        if not prefix or any(not isinstance(p, str) or not p or "." in p for p in prefix):
            raise ValueError(f"prefix must be non-empty labels without '.', got {prefix!r}")
        if prefix[0] == "langgraph":
            raise ValueError("LangGraph reserves the root label 'langgraph'")
        self.store = store
        self.prefix = prefix
        self._lock = threading.Lock()
        self._last_seq = 0
        self._sqlite = _sqlite_connection(store)
        if self._sqlite is not None:
            with self._sqlite_lock():
                self._sqlite.execute("PRAGMA secure_delete = ON")  # deleted rows are zeroed

    # -- helpers ---------------------------------------------------------------------------

    def _ns(self, namespace: str, kind: str) -> tuple[str, ...]:
        return (*self.prefix, _label(namespace), kind)

    def _seq(self) -> int:
        """Strictly increasing write sequence (wall-clock nanoseconds, bumped on ties)."""
        with self._lock:
            self._last_seq = max(time.time_ns(), self._last_seq + 1)
            return self._last_seq

    def _sqlite_lock(self) -> contextlib.AbstractContextManager[Any]:
        lock = getattr(self.store, "lock", None)  # SqliteStore serialises its connection
        return lock if isinstance(lock, contextlib.AbstractContextManager) else contextlib.nullcontext()

    def _scrub(self) -> None:
        """After a deletion: move the WAL into the file and truncate it (SQLite, WAL mode)."""
        if self._sqlite is None:
            return
        with self._sqlite_lock():
            (mode,) = self._sqlite.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() == "wal":
                self._sqlite.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _all(self, namespace: str, kind: str) -> list[dict[str, Any]]:
        """Every item value of one kind, in write order."""
        ns = self._ns(namespace, kind)
        values: list[dict[str, Any]] = []
        offset = 0
        while True:
            page = self.store.search(ns, limit=_PAGE, offset=offset)
            values.extend(item.value for item in page if item.namespace == ns)
            if len(page) < _PAGE:
                break
            offset += _PAGE
        values.sort(key=lambda v: (v.get("seq", 0), v.get("key", "")))
        return values

    # -- Store protocol --------------------------------------------------------------------

    def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool:
        pieces = check_write(unit, note, pieces)
        if self.has_unit(namespace, unit.key):
            return False
        seq = self._seq()
        self.store.batch([
            PutOp(self._ns(namespace, "units"), unit.key,
                  {"seq": seq, "key": unit.key, "parent": unit.parent, **_packed("unit", unit.to_dict())}, index=False),
            PutOp(self._ns(namespace, "pieces"), unit.key,
                  {"seq": seq, "key": unit.key, **_packed("pieces", [p.to_dict() for p in pieces])}, index=False),
            PutOp(self._ns(namespace, "notes"), unit.key,
                  {"seq": seq, "key": unit.key, **_packed("note", note.to_dict())}, index=False),
        ])
        return True

    def has_unit(self, namespace: str, key: str) -> bool:
        return self.store.get(self._ns(namespace, "notes"), key) is not None

    def get_unit(self, namespace: str, key: str) -> Unit:
        item = self.store.get(self._ns(namespace, "units"), key)
        if item is None:
            raise KeyError(f"no unit {key!r} in namespace {namespace!r}")
        return Unit.from_dict(_unpacked(item.value, "unit"))

    def notes(self, namespace: str) -> list[Note]:
        return [Note.from_dict(_unpacked(v, "note")) for v in self._all(namespace, "notes")]

    def parents(self, namespace: str) -> dict[str, str | None]:
        committed = {v["key"] for v in self._all(namespace, "notes")}
        return {v["key"]: v.get("parent") for v in self._all(namespace, "units") if v["key"] in committed}

    def pieces(self, namespace: str, unit_key: str) -> list[Piece]:
        item = self.store.get(self._ns(namespace, "pieces"), unit_key)
        if item is None:
            return []
        return [Piece.from_dict(p) for p in _unpacked(item.value, "pieces")]

    def iter_pieces(self, namespace: str) -> Iterable[Piece]:
        committed = {v["key"] for v in self._all(namespace, "notes")}
        for value in self._all(namespace, "pieces"):
            if value["key"] in committed:
                yield from (Piece.from_dict(p) for p in _unpacked(value, "pieces"))

    def get_merged(self, namespace: str, key: str) -> MergedRecord | None:
        item = self.store.get(self._ns(namespace, "merged"), key)
        return None if item is None else MergedRecord.from_dict(_unpacked(item.value, "merged"))

    def put_merged(self, namespace: str, merged: MergedRecord) -> None:
        if self.get_merged(namespace, merged.key) is not None:
            return
        if not all(self.has_unit(namespace, k) or self.get_merged(namespace, k) is not None
                   for k in merged.covers):
            return  # a covered unit was deleted meanwhile: the merge is stale
        self.store.put(self._ns(namespace, "merged"), merged.key,
                       {"seq": self._seq(), "key": merged.key, **_packed("merged", merged.to_dict())}, index=False)

    # -- forgetting (ForgettingStore) --------------------------------------------------------

    def delete_unit(self, namespace: str, key: str) -> bool:
        """Delete a unit, its note and pieces, the links other notes hold to it and the
        merged records covering it; False if it was not stored."""
        if not self.has_unit(namespace, key):
            return False
        notes_ns = self._ns(namespace, "notes")
        ops = [PutOp(notes_ns, key, None), PutOp(self._ns(namespace, "units"), key, None),
               PutOp(self._ns(namespace, "pieces"), key, None)]
        for value in self._all(namespace, "notes"):
            links = value["note"].get("links", [])
            if value["key"] != key and key in links:
                note = {**value["note"], "links": [k for k in links if k != key]}
                ops.append(PutOp(notes_ns, value["key"], {**value, "note": note}, index=False))
        covers = {v["key"]: v["merged"]["covers"] for v in self._all(namespace, "merged")}
        ops.extend(PutOp(self._ns(namespace, "merged"), k, None) for k in merged_covering(covers, [key]))
        self.store.batch(ops)
        self._scrub()
        return True

    def delete_namespace(self, namespace: str) -> int:
        """Delete a whole namespace (a thread or tenant); returns the number of units it held."""
        count = len(self._all(namespace, "notes"))
        ops = [PutOp(self._ns(namespace, kind), v["key"], None)
               for kind in ("notes", "units", "pieces", "merged") for v in self._all(namespace, kind)]
        if ops:
            self.store.batch(ops)
            self._scrub()
        return count

    def namespaces(self) -> list[str]:
        found: list[tuple[str, ...]] = []
        offset = 0
        while True:
            page = self.store.list_namespaces(prefix=self.prefix, suffix=("notes",), limit=_PAGE,
                                              offset=offset)
            found.extend(page)
            if len(page) < _PAGE:
                break
            offset += _PAGE
        # Some backends list a namespace once it was read; keep those that hold a note.
        names = {_unlabel(ns[len(self.prefix)]) for ns in found
                 if len(ns) == len(self.prefix) + 2 and self.store.search(ns, limit=1)}
        return sorted(names)


def _packed(field: str, value: Any) -> dict[str, Any]:
    """An item field any BaseStore serialiser keeps exactly (lone surrogates tagged, flagged)."""
    value, tagged = storable(value)
    return {field: value, "tagged": True} if tagged else {field: value}


def _unpacked(item: dict[str, Any], field: str) -> Any:
    return restored(item[field]) if item.get("tagged") else item[field]
