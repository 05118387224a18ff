"""SQLite store: the embedded persistent default (one file, WAL mode, no server).

Safe for several processes writing the same file: every write is one ``BEGIN IMMEDIATE``
transaction (the unit, its note, links and pieces, or none of them) behind a busy
timeout, so writers queue instead of failing and the write order (``seq``) is the commit
order. ``notes()`` reads the notes table only, never raw text. Deletion runs with
``secure_delete`` on and checkpoints the WAL, so forgotten text does not linger in the
file. Namespaces are always bound as parameters, never put into SQL text.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from ..model.schema import MergedRecord, Note, Piece, Unit
from . import codec
from .forgetting import merged_covering
from .names import check_namespace
from .sql_schema import SCHEMA_VERSION, migrations

if TYPE_CHECKING:
    import numpy as np

MIGRATIONS = migrations("sqlite")
#: The chain of a namespace in write order, read from the ``units_chain`` index alone.
PARENTS_SQL = "SELECT key, parent FROM units WHERE namespace = ? ORDER BY seq"
#: The keys of a namespace's notes in write order, read from the ``notes_keys`` index alone.
NOTE_KEYS_SQL = "SELECT key FROM notes WHERE namespace = ? ORDER BY seq"


class SchemaVersionError(RuntimeError):
    """The database was written by a newer FlexA-Mem than this one."""


def wal_connection(path: str | os.PathLike[str], timeout: float) -> sqlite3.Connection:
    """An autocommit connection to ``path`` in WAL mode, for several processes at once.

    Switching a file to WAL can fail at once with "database is locked" while another
    process opens or recovers the same file, without SQLite waiting through its busy
    timeout (as when two workers open a new file together), so it is retried, with
    backoff, until ``timeout`` has passed.
    """
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    deadline, pause = time.monotonic() + timeout, 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return conn
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                conn.close()
                raise
            time.sleep(pause)
            pause = min(0.25, 2 * pause)


class SQLiteStore:
    """Append-only store in one SQLite file (``":memory:"`` works for a private store).

    Thread-safe (one connection behind a lock) and process-safe (WAL, ``BEGIN IMMEDIATE``,
    ``busy_timeout``). A store object that crosses a ``fork`` reconnects in the child.
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 60.0,
                 synchronous: str = "NORMAL") -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = str(path)
        if self.path != ":memory:":
            parent = Path(self.path).expanduser().resolve().parent
            if not parent.is_dir():
                raise FileNotFoundError(f"directory of the SQLite store does not exist: {parent}")
        self._timeout = timeout
        self._synchronous = synchronous.upper()
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._connection()

    # -- connection and schema -------------------------------------------------------

    @property
    def url(self) -> str:
        """``sqlite:////absolute/path.db`` (``sqlite:///:memory:`` opens a new private database)."""
        if self.path == ":memory:":
            return "sqlite:///:memory:"
        return "sqlite:///" + quote(str(Path(self.path).expanduser().resolve()))

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self.path == ":memory:":
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None,
                                   check_same_thread=False)
        else:
            conn = wal_connection(self.path, self._timeout)
        conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA secure_delete = ON")
        self._conn, self._pid = conn, os.getpid()
        self._migrate(conn)
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        with self._transaction(conn):
            conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = row[0] or 0
            if current > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.path} has schema version {current}; this FlexA-Mem reads up to "
                    f"{SCHEMA_VERSION}: upgrade flexamem")
            for version in range(current + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._connection()
            with self._transaction(conn):
                yield conn

    def _read(self, sql: str, params: Sequence[object]) -> list[tuple]:
        with self._lock:
            return self._connection().execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return int(self._read("SELECT MAX(version) FROM schema_version", ())[0][0])

    # -- Store protocol ---------------------------------------------------------------

    def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool:
        check_namespace(namespace)
        plist = codec.check_write(unit, note, pieces)
        unit_data, note_data = codec.unit_text(unit), codec.note_text(note)
        vec = codec.embedding_bytes(note.embedding)
        piece_rows = [(p.index, codec.piece_text(p), codec.piece_vector_bytes(p)) for p in plist]
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO units (namespace, key, parent, data) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (namespace, key) DO NOTHING",
                (namespace, unit.key, unit.parent, unit_data))
            if cur.rowcount == 0:
                return False
            seq = cur.lastrowid
            conn.execute("INSERT INTO notes (namespace, key, seq, data, embedding) VALUES (?, ?, ?, ?, ?)",
                         (namespace, unit.key, seq, note_data, vec))
            conn.executemany("INSERT INTO links (namespace, src, pos, dst) VALUES (?, ?, ?, ?)",
                             [(namespace, unit.key, i, dst) for i, dst in enumerate(note.links)])
            conn.executemany(
                "INSERT INTO pieces (namespace, unit_key, idx, seq, data, embedding) VALUES (?, ?, ?, ?, ?, ?)",
                [(namespace, unit.key, idx, seq, data, vec) for idx, data, vec in piece_rows])
            return True

    def put_piece_vectors(self, namespace: str, unit_key: str, vectors: Mapping[int, np.ndarray]) -> None:
        """Fill the own vectors of a unit's pieces that have none (``PieceVectorFill``)."""
        check_namespace(namespace)
        rows = codec.fill_vectors(vectors)
        with self._write() as conn:
            conn.executemany("UPDATE pieces SET embedding = ? WHERE namespace = ? AND unit_key = ? AND idx = ? "
                             "AND embedding IS NULL",
                             [(codec.embedding_bytes(v), namespace, unit_key, i) for i, v in rows.items()])

    def has_unit(self, namespace: str, key: str) -> bool:
        check_namespace(namespace)
        return bool(self._read("SELECT 1 FROM units WHERE namespace = ? AND key = ?", (namespace, key)))

    def get_unit(self, namespace: str, key: str) -> Unit:
        check_namespace(namespace)
        rows = self._read("SELECT data FROM units WHERE namespace = ? AND key = ?", (namespace, key))
        if not rows:
            raise KeyError(f"no unit {key!r} in namespace {namespace!r}")
        return codec.unit_from_text(rows[0][0])

    def notes(self, namespace: str) -> list[Note]:
        return self._keys_and_notes_from(namespace, 0)[1]

    def keys_and_notes_from(self, namespace: str, start: int) -> tuple[list[str], list[Note]]:
        """The keys of the namespace's notes in write order (from the ``notes_keys`` index) and
        its notes from position ``start`` on, in one read (``NotesFrom``)."""
        return self._keys_and_notes_from(namespace, start)

    def _keys_and_notes_from(self, namespace: str, start: int) -> tuple[list[str], list[Note]]:
        check_namespace(namespace)
        start = max(0, int(start))
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN")  # one snapshot for keys, notes and links
            try:
                keys = [r[0] for r in conn.execute(NOTE_KEYS_SQL, (namespace,))]
                rows = conn.execute("SELECT key, data, embedding FROM notes WHERE namespace = ? "
                                    "ORDER BY seq LIMIT -1 OFFSET ?", (namespace, start)).fetchall()
                if start == 0:
                    links = conn.execute("SELECT src, dst FROM links WHERE namespace = ? ORDER BY src, pos",
                                         (namespace,)).fetchall()
                else:  # the links of those notes only
                    links = conn.execute(
                        "SELECT src, dst FROM links WHERE namespace = ? AND src IN (SELECT key FROM notes "
                        "WHERE namespace = ? ORDER BY seq LIMIT -1 OFFSET ?) ORDER BY src, pos",
                        (namespace, namespace, start)).fetchall()
            finally:
                conn.execute("COMMIT")
        return keys, codec.notes_from_rows(rows, links)

    def parents(self, namespace: str) -> dict[str, str | None]:
        check_namespace(namespace)
        return dict(self._read(PARENTS_SQL, (namespace,)))

    def pieces(self, namespace: str, unit_key: str) -> list[Piece]:
        check_namespace(namespace)
        rows = self._read("SELECT data, embedding FROM pieces WHERE namespace = ? AND unit_key = ? ORDER BY idx",
                          (namespace, unit_key))
        return [codec.piece_from_text(data, vec) for data, vec in rows]

    def iter_pieces(self, namespace: str) -> Iterable[Piece]:
        check_namespace(namespace)
        rows = self._read("SELECT data, embedding FROM pieces WHERE namespace = ? ORDER BY seq, idx", (namespace,))
        return [codec.piece_from_text(data, vec) for data, vec in rows]

    def get_merged(self, namespace: str, key: str) -> MergedRecord | None:
        check_namespace(namespace)
        rows = self._read("SELECT data FROM merged WHERE namespace = ? AND key = ?", (namespace, key))
        return codec.merged_from_text(rows[0][0]) if rows else None

    def put_merged(self, namespace: str, merged: MergedRecord) -> None:
        check_namespace(namespace)
        data = codec.merged_text(merged)
        with self._write() as conn:
            if not _all_stored(conn, namespace, merged.covers):
                return  # something it covers was deleted meanwhile: never store its text
            cur = conn.execute("INSERT INTO merged (namespace, key, data) VALUES (?, ?, ?) "
                               "ON CONFLICT (namespace, key) DO NOTHING", (namespace, merged.key, data))
            if cur.rowcount:
                conn.executemany(
                    "INSERT OR IGNORE INTO merged_covers (namespace, merged_key, covered) VALUES (?, ?, ?)",
                    [(namespace, merged.key, c) for c in merged.covers])

    def merged_records(self, namespace: str) -> list[MergedRecord]:
        check_namespace(namespace)
        rows = self._read("SELECT data FROM merged WHERE namespace = ? ORDER BY key", (namespace,))
        return [codec.merged_from_text(r[0]) for r in rows]

    def namespace_version(self, namespace: str) -> str:
        check_namespace(namespace)
        row = self._read("SELECT (SELECT COALESCE(MAX(seq), 0) FROM notes WHERE namespace = ?), "
                         "(SELECT COALESCE(MAX(deletions), 0) FROM namespace_deletions WHERE namespace = ?)",
                         (namespace, namespace))[0]
        return f"{row[0]}.{row[1]}"

    def get_index_snapshot(self, namespace: str) -> bytes | None:
        check_namespace(namespace)
        rows = self._read("SELECT data FROM index_snapshots WHERE namespace = ?", (namespace,))
        return bytes(rows[0][0]) if rows else None

    def put_index_snapshot(self, namespace: str, data: bytes) -> None:
        check_namespace(namespace)
        with self._write() as conn:
            conn.execute("INSERT INTO index_snapshots (namespace, data) VALUES (?, ?) "
                         "ON CONFLICT (namespace) DO UPDATE SET data = excluded.data", (namespace, data))

    def get_request_state(self, namespace: str) -> bytes | None:
        check_namespace(namespace)
        rows = self._read("SELECT data FROM request_states WHERE namespace = ?", (namespace,))
        return bytes(rows[0][0]) if rows else None

    def put_request_state(self, namespace: str, data: bytes) -> None:
        check_namespace(namespace)
        with self._write() as conn:
            conn.execute("INSERT INTO request_states (namespace, data) VALUES (?, ?) "
                         "ON CONFLICT (namespace) DO UPDATE SET data = excluded.data", (namespace, data))

    def namespaces(self) -> list[str]:
        return [r[0] for r in self._read(
            "SELECT namespace FROM units GROUP BY namespace ORDER BY MIN(seq)", ())]

    # -- forgetting -------------------------------------------------------------------

    def delete_unit(self, namespace: str, key: str) -> bool:
        """Forget a unit: note, pieces, embedding, links to it, merged records covering it."""
        check_namespace(namespace)
        with self._write() as conn:
            cur = conn.execute("DELETE FROM units WHERE namespace = ? AND key = ?", (namespace, key))
            if cur.rowcount == 0:
                return False
            for table, column in (("notes", "key"), ("pieces", "unit_key"), ("links", "src"),
                                  ("links", "dst")):
                conn.execute(f"DELETE FROM {table} WHERE namespace = ? AND {column} = ?", (namespace, key))
            conn.execute("DELETE FROM index_snapshots WHERE namespace = ?", (namespace,))
            conn.execute("DELETE FROM request_states WHERE namespace = ?", (namespace,))
            conn.execute("INSERT INTO namespace_deletions (namespace, deletions) VALUES (?, 1) ON CONFLICT "
                         "(namespace) DO UPDATE SET deletions = namespace_deletions.deletions + 1", (namespace,))
            covers: dict[str, list[str]] = {}
            for mkey, covered in conn.execute(
                    "SELECT merged_key, covered FROM merged_covers WHERE namespace = ?", (namespace,)):
                covers.setdefault(mkey, []).append(covered)
            dropped = [(namespace, m) for m in merged_covering(covers, [key])]
            conn.executemany("DELETE FROM merged WHERE namespace = ? AND key = ?", dropped)
            conn.executemany("DELETE FROM merged_covers WHERE namespace = ? AND merged_key = ?", dropped)
        self._checkpoint()
        return True

    def delete_namespace(self, namespace: str) -> int:
        """Forget a whole namespace (a thread or a tenant); returns the units deleted."""
        check_namespace(namespace)
        with self._write() as conn:
            deleted = conn.execute("DELETE FROM units WHERE namespace = ?", (namespace,)).rowcount
            # seq never repeats (AUTOINCREMENT), so the version after this differs from any before
            for table in ("notes", "pieces", "links", "merged", "merged_covers", "index_snapshots",
                          "request_states", "namespace_deletions"):
                conn.execute(f"DELETE FROM {table} WHERE namespace = ?", (namespace,))
        self._checkpoint()
        return deleted

    def _checkpoint(self) -> None:
        """Move the WAL into the file and truncate it, so deleted text leaves the WAL too."""
        if self.path != ":memory:":
            with self._lock:
                self._connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _all_stored(conn: sqlite3.Connection, namespace: str, keys: Iterable[str]) -> bool:
    """Whether every key is a stored unit or merged record of the namespace (one query per
    500 keys: a merge of the oldest records covers thousands of units)."""
    wanted = sorted(set(keys))
    for i in range(0, len(wanted), 500):
        chunk = wanted[i:i + 500]
        marks = ",".join("?" * len(chunk))
        found = conn.execute(f"SELECT COUNT(*) FROM (SELECT key FROM units WHERE namespace = ? AND key IN ({marks}) "
                             f"UNION SELECT key FROM merged WHERE namespace = ? AND key IN ({marks}))",
                             (namespace, *chunk, namespace, *chunk)).fetchone()[0]
        if found < len(chunk):
            return False
    return True
