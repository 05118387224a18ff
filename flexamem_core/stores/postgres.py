"""PostgreSQL store: many agent workers on many hosts sharing one memory.

psycopg 3 with a ``psycopg_pool`` connection pool; thread-safe and usable from many
processes. Writes to one namespace are serialised by a transaction-scoped advisory lock,
so ``seq`` order is commit order and every reader sees a prefix of one history. The
library creates and migrates its tables itself (``schema_version`` table, migrations run
under an advisory lock, so many workers may start at once). Tables live in a PostgreSQL
schema of your choice (default ``flexamem``). Namespaces are always bound parameters.
:class:`AsyncPostgresStore` is the ``async`` twin on an ``AsyncConnectionPool``.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..schema import MergedRecord, Note, Piece, Unit
from . import codec
from .forgetting import merged_covering
from .names import check_namespace

SCHEMA_VERSION = 1
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: Migrations by target version; ``{s}`` is the (quoted) schema. Each runs in one transaction.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        """CREATE TABLE {s}.units (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            namespace TEXT NOT NULL, key TEXT NOT NULL, parent TEXT, data TEXT NOT NULL,
            UNIQUE (namespace, key))""",
        """CREATE TABLE {s}.notes (
            namespace TEXT NOT NULL, key TEXT NOT NULL, seq BIGINT NOT NULL,
            data TEXT NOT NULL, embedding BYTEA NOT NULL, PRIMARY KEY (namespace, key))""",
        "CREATE INDEX notes_by_seq ON {s}.notes (namespace, seq)",
        """CREATE TABLE {s}.links (
            namespace TEXT NOT NULL, src TEXT NOT NULL, pos INTEGER NOT NULL, dst TEXT NOT NULL,
            PRIMARY KEY (namespace, src, pos))""",
        "CREATE INDEX links_by_dst ON {s}.links (namespace, dst)",
        """CREATE TABLE {s}.pieces (
            namespace TEXT NOT NULL, unit_key TEXT NOT NULL, idx INTEGER NOT NULL,
            seq BIGINT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (namespace, unit_key, idx))""",
        "CREATE INDEX pieces_by_seq ON {s}.pieces (namespace, seq, idx)",
        """CREATE TABLE {s}.merged (
            namespace TEXT NOT NULL, key TEXT NOT NULL, data TEXT NOT NULL,
            PRIMARY KEY (namespace, key))""",
        """CREATE TABLE {s}.merged_covers (
            namespace TEXT NOT NULL, merged_key TEXT NOT NULL, covered TEXT NOT NULL,
            PRIMARY KEY (namespace, merged_key, covered))""",
        "CREATE INDEX merged_covers_by_covered ON {s}.merged_covers (namespace, covered)",
    ],
}


class SchemaVersionError(RuntimeError):
    """The database was written by a newer FlexA-Mem than this one."""


def _import_psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("PostgresStore needs psycopg 3 and psycopg_pool: "
                          "pip install 'flexamem[postgres]'") from exc
    return psycopg


@dataclass(frozen=True)
class _Statements:
    """Every statement of the store, composed once with the schema identifier."""

    lock: Any
    insert_unit: Any
    insert_note: Any
    insert_link: Any
    insert_piece: Any
    has_unit: Any
    get_unit: Any
    notes: Any
    links: Any
    parents: Any
    pieces: Any
    iter_pieces: Any
    get_merged: Any
    stored_keys: Any
    insert_merged: Any
    insert_cover: Any
    namespaces: Any
    delete_unit: Any
    delete_unit_rows: tuple[Any, ...]
    covers: Any
    delete_merged: Any
    delete_namespace: Any
    delete_namespace_rows: tuple[Any, ...]

    @classmethod
    def compose(cls, schema: str) -> _Statements:
        from psycopg import sql

        s = sql.Identifier(schema)

        def q(text: str) -> Any:
            return sql.SQL(text).format(s=s)

        return cls(
            lock="SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            insert_unit=q("INSERT INTO {s}.units (namespace, key, parent, data) VALUES (%s, %s, %s, %s) "
                          "ON CONFLICT (namespace, key) DO NOTHING RETURNING seq"),
            insert_note=q("INSERT INTO {s}.notes (namespace, key, seq, data, embedding) "
                          "VALUES (%s, %s, %s, %s, %s)"),
            insert_link=q("INSERT INTO {s}.links (namespace, src, pos, dst) VALUES (%s, %s, %s, %s)"),
            insert_piece=q("INSERT INTO {s}.pieces (namespace, unit_key, idx, seq, data) "
                           "VALUES (%s, %s, %s, %s, %s)"),
            has_unit=q("SELECT 1 FROM {s}.units WHERE namespace = %s AND key = %s"),
            get_unit=q("SELECT data FROM {s}.units WHERE namespace = %s AND key = %s"),
            notes=q("SELECT key, data, embedding FROM {s}.notes WHERE namespace = %s ORDER BY seq"),
            links=q("SELECT src, dst FROM {s}.links WHERE namespace = %s ORDER BY src, pos"),
            parents=q("SELECT key, parent FROM {s}.units WHERE namespace = %s ORDER BY seq"),
            pieces=q("SELECT data FROM {s}.pieces WHERE namespace = %s AND unit_key = %s ORDER BY idx"),
            iter_pieces=q("SELECT data FROM {s}.pieces WHERE namespace = %s ORDER BY seq, idx"),
            get_merged=q("SELECT data FROM {s}.merged WHERE namespace = %s AND key = %s"),
            stored_keys=q("SELECT key FROM {s}.units WHERE namespace = %s AND key = ANY(%s) UNION "
                          "SELECT key FROM {s}.merged WHERE namespace = %s AND key = ANY(%s)"),
            insert_merged=q("INSERT INTO {s}.merged (namespace, key, data) VALUES (%s, %s, %s) "
                            "ON CONFLICT (namespace, key) DO NOTHING RETURNING key"),
            insert_cover=q("INSERT INTO {s}.merged_covers (namespace, merged_key, covered) "
                           "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"),
            namespaces=q("SELECT namespace FROM {s}.units GROUP BY namespace ORDER BY MIN(seq)"),
            delete_unit=q("DELETE FROM {s}.units WHERE namespace = %s AND key = %s RETURNING seq"),
            delete_unit_rows=(
                q("DELETE FROM {s}.notes WHERE namespace = %s AND key = %s"),
                q("DELETE FROM {s}.pieces WHERE namespace = %s AND unit_key = %s"),
                q("DELETE FROM {s}.links WHERE namespace = %s AND src = %s"),
                q("DELETE FROM {s}.links WHERE namespace = %s AND dst = %s"),
            ),
            covers=q("SELECT merged_key, covered FROM {s}.merged_covers WHERE namespace = %s"),
            delete_merged=(q("DELETE FROM {s}.merged WHERE namespace = %s AND key = ANY(%s)"),
                           q("DELETE FROM {s}.merged_covers WHERE namespace = %s AND merged_key = ANY(%s)")),
            delete_namespace=q("DELETE FROM {s}.units WHERE namespace = %s"),
            delete_namespace_rows=tuple(q(f"DELETE FROM {{s}}.{t} WHERE namespace = %s")
                                        for t in ("notes", "pieces", "links", "merged", "merged_covers")),
        )


def check_schema_name(schema: str) -> str:
    """A PostgreSQL schema name for the tables: lower-case letters, digits and ``_``."""
    if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
        raise ValueError(f"invalid PostgreSQL schema name {schema!r}: use 1-63 of [a-z0-9_], "
                         "not starting with a digit")
    return schema


def migrate(conn: Any, schema: str) -> int:
    """Create or upgrade the tables in ``schema``; returns the schema version. Commits."""
    from psycopg import sql

    s = sql.Identifier(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"flexamem-migrate/{schema}",))
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {s}").format(s=s))
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {s}.schema_version (version INTEGER NOT NULL)")
                     .format(s=s))
        current = conn.execute(sql.SQL("SELECT MAX(version) FROM {s}.schema_version").format(s=s)
                               ).fetchone()[0] or 0
        if current > SCHEMA_VERSION:
            raise SchemaVersionError(f"PostgreSQL schema {schema!r} has version {current}; this "
                                     f"FlexA-Mem reads up to {SCHEMA_VERSION}: upgrade flexamem")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                conn.execute(sql.SQL(statement).format(s=s))
            conn.execute(sql.SQL("INSERT INTO {s}.schema_version (version) VALUES (%s)").format(s=s),
                         (version,))
    return max(current, SCHEMA_VERSION)


def _lock_key(schema: str, namespace: str) -> str:
    return f"flexamem/{schema}/{namespace}"


def _notes_from_rows(rows: Iterable[tuple], link_rows: Iterable[tuple[str, str]]) -> list[Note]:
    links = codec.group_links(link_rows)
    return [codec.note_from_parts(data, emb, links.get(key, ())) for key, data, emb in rows]


class PostgresStore:
    """Append-only store in PostgreSQL behind a connection pool (sync, thread-safe).

    ``conninfo`` is a libpq URL or DSN (``postgresql://user@host:5432/db``). A store that
    crosses a ``fork`` opens a fresh pool in the child.
    """

    def __init__(self, conninfo: str, *, schema: str = "flexamem", min_size: int = 1,
                 max_size: int = 8, timeout: float = 30.0) -> None:
        _import_psycopg()
        self.conninfo = conninfo
        self.schema = check_schema_name(schema)
        self._pool_args = {"min_size": min_size, "max_size": max_size, "timeout": timeout}
        self._sql = _Statements.compose(schema)
        self._lock = threading.Lock()
        self._pool: Any = None
        self._pid = -1
        with self._connection() as conn:
            migrate(conn, schema)

    def _connection(self) -> Any:
        if self._pool is None or self._pid != os.getpid():
            with self._lock:
                if self._pool is None or self._pid != os.getpid():
                    from psycopg_pool import ConnectionPool

                    self._pool = ConnectionPool(self.conninfo, open=True, name="flexamem",
                                                kwargs={"autocommit": False}, **self._pool_args)
                    self._pid = os.getpid()
        return self._pool.connection()

    def close(self) -> None:
        with self._lock:
            if self._pool is not None and self._pid == os.getpid():
                self._pool.close()
            self._pool = None

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fetch(self, statement: Any, params: Sequence[object]) -> list[tuple]:
        with self._connection() as conn:
            return conn.execute(statement, params).fetchall()

    # -- Store protocol ---------------------------------------------------------------

    def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool:
        check_namespace(namespace)
        plist = codec.check_write(unit, note, pieces)
        unit_data, note_data = codec.unit_text(unit), codec.note_text(note)
        vec = codec.embedding_bytes(note.embedding)
        q = self._sql
        with self._connection() as conn, conn.transaction():
            conn.execute(q.lock, (_lock_key(self.schema, namespace),))
            row = conn.execute(q.insert_unit, (namespace, unit.key, unit.parent, unit_data)).fetchone()
            if row is None:
                return False
            seq = row[0]
            with conn.cursor() as cur:
                cur.execute(q.insert_note, (namespace, unit.key, seq, note_data, vec))
                cur.executemany(q.insert_link,
                                [(namespace, unit.key, i, d) for i, d in enumerate(note.links)])
                cur.executemany(q.insert_piece, [(namespace, unit.key, p.index, seq, codec.piece_text(p))
                                                 for p in plist])
            return True

    def has_unit(self, namespace: str, key: str) -> bool:
        check_namespace(namespace)
        return bool(self._fetch(self._sql.has_unit, (namespace, key)))

    def get_unit(self, namespace: str, key: str) -> Unit:
        check_namespace(namespace)
        rows = self._fetch(self._sql.get_unit, (namespace, key))
        if not rows:
            raise KeyError(f"no unit {key!r} in namespace {namespace!r}")
        return codec.unit_from_text(rows[0][0])

    def notes(self, namespace: str) -> list[Note]:
        check_namespace(namespace)
        with self._connection() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot
            rows = conn.execute(self._sql.notes, (namespace,)).fetchall()
            link_rows = conn.execute(self._sql.links, (namespace,)).fetchall()
        return _notes_from_rows(rows, link_rows)

    def parents(self, namespace: str) -> dict[str, str | None]:
        check_namespace(namespace)
        return dict(self._fetch(self._sql.parents, (namespace,)))

    def pieces(self, namespace: str, unit_key: str) -> list[Piece]:
        check_namespace(namespace)
        return [codec.piece_from_text(r[0]) for r in self._fetch(self._sql.pieces, (namespace, unit_key))]

    def iter_pieces(self, namespace: str) -> Iterable[Piece]:
        check_namespace(namespace)
        return [codec.piece_from_text(r[0]) for r in self._fetch(self._sql.iter_pieces, (namespace,))]

    def get_merged(self, namespace: str, key: str) -> MergedRecord | None:
        check_namespace(namespace)
        rows = self._fetch(self._sql.get_merged, (namespace, key))
        return codec.merged_from_text(rows[0][0]) if rows else None

    def put_merged(self, namespace: str, merged: MergedRecord) -> None:
        check_namespace(namespace)
        q, covers = self._sql, sorted(set(merged.covers))
        with self._connection() as conn, conn.transaction():
            conn.execute(q.lock, (_lock_key(self.schema, namespace),))
            stored = conn.execute(q.stored_keys, (namespace, covers, namespace, covers)).fetchall()
            if len(stored) < len(covers):
                return  # something it covers was deleted meanwhile: never store its text
            if conn.execute(q.insert_merged, (namespace, merged.key, codec.merged_text(merged))).fetchone():
                with conn.cursor() as cur:
                    cur.executemany(q.insert_cover, [(namespace, merged.key, c) for c in covers])

    def namespaces(self) -> list[str]:
        return [r[0] for r in self._fetch(self._sql.namespaces, ())]

    # -- forgetting -------------------------------------------------------------------

    def delete_unit(self, namespace: str, key: str) -> bool:
        """Forget a unit: note, pieces, embedding, links to it, merged records covering it."""
        check_namespace(namespace)
        q = self._sql
        with self._connection() as conn, conn.transaction():
            conn.execute(q.lock, (_lock_key(self.schema, namespace),))
            if conn.execute(q.delete_unit, (namespace, key)).fetchone() is None:
                return False
            for statement in q.delete_unit_rows:
                conn.execute(statement, (namespace, key))
            covers: dict[str, list[str]] = {}
            for mkey, covered in conn.execute(q.covers, (namespace,)).fetchall():
                covers.setdefault(mkey, []).append(covered)
            dropped = sorted(merged_covering(covers, [key]))
            if dropped:
                for statement in q.delete_merged:
                    conn.execute(statement, (namespace, dropped))
            return True

    def delete_namespace(self, namespace: str) -> int:
        """Forget a whole namespace (a thread or a tenant); returns the units deleted."""
        check_namespace(namespace)
        q = self._sql
        with self._connection() as conn, conn.transaction():
            conn.execute(q.lock, (_lock_key(self.schema, namespace),))
            deleted = conn.execute(q.delete_namespace, (namespace,)).rowcount
            for statement in q.delete_namespace_rows:
                conn.execute(statement, (namespace,))
            return deleted


class AsyncPostgresStore:
    """The ``async`` twin of :class:`PostgresStore` on an ``AsyncConnectionPool``.

    Same tables and guarantees; every method is a coroutine. Create it with
    ``store = await AsyncPostgresStore.open(conninfo)`` and ``await store.close()``.
    """

    def __init__(self, conninfo: str, *, schema: str = "flexamem", min_size: int = 1,
                 max_size: int = 8, timeout: float = 30.0) -> None:
        _import_psycopg()
        self.conninfo = conninfo
        self.schema = check_schema_name(schema)
        self._sql = _Statements.compose(schema)
        from psycopg_pool import AsyncConnectionPool

        self._pool = AsyncConnectionPool(conninfo, open=False, name="flexamem-async",
                                         kwargs={"autocommit": False}, min_size=min_size,
                                         max_size=max_size, timeout=timeout)

    @classmethod
    async def open(cls, conninfo: str, **kwargs: Any) -> AsyncPostgresStore:
        """Open the pool and create or migrate the tables."""
        store = cls(conninfo, **kwargs)
        await store._pool.open()
        import psycopg

        with psycopg.Connection.connect(conninfo) as conn:  # migrations are rare: run them sync
            migrate(conn, store.schema)
        return store

    async def close(self) -> None:
        await self._pool.close()

    async def _fetch(self, statement: Any, params: Sequence[object]) -> list[tuple]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(statement, params)
            return await cur.fetchall()

    async def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool:
        check_namespace(namespace)
        plist = codec.check_write(unit, note, pieces)
        q = self._sql
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute(q.lock, (_lock_key(self.schema, namespace),))
            cur = await conn.execute(q.insert_unit, (namespace, unit.key, unit.parent, codec.unit_text(unit)))
            row = await cur.fetchone()
            if row is None:
                return False
            seq = row[0]
            async with conn.cursor() as c:
                await c.execute(q.insert_note, (namespace, unit.key, seq, codec.note_text(note),
                                                codec.embedding_bytes(note.embedding)))
                await c.executemany(q.insert_link, [(namespace, unit.key, i, d)
                                                    for i, d in enumerate(note.links)])
                await c.executemany(q.insert_piece, [(namespace, unit.key, p.index, seq, codec.piece_text(p))
                                                     for p in plist])
            return True

    async def has_unit(self, namespace: str, key: str) -> bool:
        check_namespace(namespace)
        return bool(await self._fetch(self._sql.has_unit, (namespace, key)))

    async def get_unit(self, namespace: str, key: str) -> Unit:
        check_namespace(namespace)
        rows = await self._fetch(self._sql.get_unit, (namespace, key))
        if not rows:
            raise KeyError(f"no unit {key!r} in namespace {namespace!r}")
        return codec.unit_from_text(rows[0][0])

    async def notes(self, namespace: str) -> list[Note]:
        check_namespace(namespace)
        async with self._pool.connection() as conn:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            rows = await (await conn.execute(self._sql.notes, (namespace,))).fetchall()
            link_rows = await (await conn.execute(self._sql.links, (namespace,))).fetchall()
        return _notes_from_rows(rows, link_rows)

    async def parents(self, namespace: str) -> dict[str, str | None]:
        check_namespace(namespace)
        return dict(await self._fetch(self._sql.parents, (namespace,)))

    async def pieces(self, namespace: str, unit_key: str) -> list[Piece]:
        check_namespace(namespace)
        rows = await self._fetch(self._sql.pieces, (namespace, unit_key))
        return [codec.piece_from_text(r[0]) for r in rows]

    async def iter_pieces(self, namespace: str) -> list[Piece]:
        check_namespace(namespace)
        return [codec.piece_from_text(r[0]) for r in await self._fetch(self._sql.iter_pieces, (namespace,))]

    async def namespaces(self) -> list[str]:
        return [r[0] for r in await self._fetch(self._sql.namespaces, ())]
