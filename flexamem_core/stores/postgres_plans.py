"""What the PostgreSQL stores run: schema, migrations, statements and per-operation plans.

The sync :class:`~flexamem_core.stores.postgres.PostgresStore` and the asyncio
:class:`~flexamem_core.stores.postgres.AsyncPostgresStore` share everything but I/O. Each
operation is a *plan* (sans-I/O): a generator that yields the :class:`Call` s to run in one
transaction, receives each call's result, and returns the operation's result; each store
only drives plans on its own kind of connection (:func:`run_plan`, :func:`arun_plan`). So
both stores run the same SQL under the same locks and decode rows the same way.
Namespaces are validated with ``check_namespace`` before a plan starts and are always
bound parameters; the schema is a checked, quoted identifier.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from ..model.schema import MergedRecord, Note, Piece, Unit
from . import codec
from .forgetting import merged_covering
from .names import check_namespace
from .sql_schema import SCHEMA_VERSION, migrations

if TYPE_CHECKING:
    import numpy as np

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"

MIGRATIONS = migrations("postgres")

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One statement of a plan. ``many``: run it once per parameter tuple (``executemany``).
    ``binary``: results in PostgreSQL's binary format, for reads of large ``bytea`` values
    (the text format sends them hex-encoded, twice the bytes, and parses them in Python:
    slow for a snapshot)."""

    statement: Any
    params: Sequence[Any] = ()
    many: bool = False
    binary: bool = False


#: Yields calls, receives each call's rows (or, for a command, its row count), returns T.
Plan = Generator[Call, Any, T]


class SchemaVersionError(RuntimeError):
    """The database was written by a newer FlexA-Mem than this one."""


def check_schema_name(schema: str) -> str:
    """A PostgreSQL schema name for the tables: lower-case letters, digits and ``_``."""
    if not isinstance(schema, str) or not _SCHEMA_NAME.match(schema):
        raise ValueError(f"invalid PostgreSQL schema name {schema!r}: use 1-63 of [a-z0-9_], "
                         "not starting with a digit")
    return schema


# -- drivers: the only I/O ---------------------------------------------------------------

def run_plan(conn: Any, plan: Plan[T]) -> T:
    """Run a plan on a sync psycopg connection, in one transaction."""
    with conn.transaction():
        result: Any = None
        try:
            while True:
                call = plan.send(result)
                if call.many:
                    with conn.cursor() as cur:
                        cur.executemany(call.statement, call.params)
                    result = None
                else:
                    cur = conn.execute(call.statement, call.params, binary=call.binary)
                    result = cur.fetchall() if cur.description is not None else cur.rowcount
        except StopIteration as done:
            return done.value


async def arun_plan(conn: Any, plan: Plan[T]) -> T:
    """Run a plan on an async psycopg connection, in one transaction."""
    async with conn.transaction():
        result: Any = None
        try:
            while True:
                call = plan.send(result)
                if call.many:
                    async with conn.cursor() as cur:
                        await cur.executemany(call.statement, call.params)
                    result = None
                else:
                    cur = await conn.execute(call.statement, call.params, binary=call.binary)
                    result = await cur.fetchall() if cur.description is not None else cur.rowcount
        except StopIteration as done:
            return done.value


# -- row decoding ---------------------------------------------------------------------

def _first_value(rows: list[tuple]) -> Any:
    return rows[0][0] if rows else None


# -- the operations -------------------------------------------------------------------

class Plans:
    """Every store operation as a plan, for one schema. Arguments are checked eagerly."""

    def __init__(self, schema: str) -> None:
        from psycopg import sql

        self.schema = check_schema_name(schema)
        s = sql.Identifier(schema)

        def q(text: str) -> Any:
            return sql.SQL(text).format(s=s)

        self._q = q
        self._writes(q)
        self._reads(q)
        self._deletes(q)

    def _writes(self, q: Callable[[str], Any]) -> None:
        """The statements that add rows."""
        self.insert_unit = q("INSERT INTO {s}.units (namespace, key, parent, data) VALUES (%s, %s, %s, %s) "
                             "ON CONFLICT (namespace, key) DO NOTHING RETURNING seq")
        self.insert_note = q("INSERT INTO {s}.notes (namespace, key, seq, data, embedding) "
                             "VALUES (%s, %s, %s, %s, %s)")
        self.insert_link = q("INSERT INTO {s}.links (namespace, src, pos, dst) VALUES (%s, %s, %s, %s)")
        self.insert_piece = q("INSERT INTO {s}.pieces (namespace, unit_key, idx, seq, data, embedding) "
                              "VALUES (%s, %s, %s, %s, %s, %s)")
        self.fill_piece_vector = q("UPDATE {s}.pieces SET embedding = %s WHERE namespace = %s AND unit_key = %s "
                                   "AND idx = %s AND embedding IS NULL")
        self.insert_merged = q("INSERT INTO {s}.merged (namespace, key, data) VALUES (%s, %s, %s) "
                               "ON CONFLICT (namespace, key) DO NOTHING RETURNING key")
        self.insert_cover = q("INSERT INTO {s}.merged_covers (namespace, merged_key, covered) "
                              "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING")
        self.count_deletion_sql = q("INSERT INTO {s}.namespace_deletions (namespace, deletions) VALUES (%s, 1) "
                                    "ON CONFLICT (namespace) DO UPDATE SET "
                                    "deletions = {s}.namespace_deletions.deletions + 1")
        self.put_snapshot_sql = q("INSERT INTO {s}.index_snapshots (namespace, data) VALUES (%s, %s) "
                                  "ON CONFLICT (namespace) DO UPDATE SET data = EXCLUDED.data")
        self.put_request_state_sql = q("INSERT INTO {s}.request_states (namespace, data) VALUES (%s, %s) "
                                       "ON CONFLICT (namespace) DO UPDATE SET data = EXCLUDED.data")

    def _reads(self, q: Callable[[str], Any]) -> None:
        """The statements that read rows."""
        self.has_unit_sql = q("SELECT 1 FROM {s}.units WHERE namespace = %s AND key = %s")
        self.get_unit_sql = q("SELECT data FROM {s}.units WHERE namespace = %s AND key = %s")
        self.links_sql = q("SELECT src, dst FROM {s}.links WHERE namespace = %s ORDER BY src, pos")
        self.parents_sql = q("SELECT key, parent FROM {s}.units WHERE namespace = %s ORDER BY seq")
        self.note_keys_sql = q("SELECT key FROM {s}.notes WHERE namespace = %s ORDER BY seq")
        self.notes_from_sql = q("SELECT key, data, embedding FROM {s}.notes WHERE namespace = %s "
                                "ORDER BY seq OFFSET %s")
        self.links_from_sql = q("SELECT src, dst FROM {s}.links WHERE namespace = %s AND src IN (SELECT key "
                                "FROM {s}.notes WHERE namespace = %s ORDER BY seq OFFSET %s) ORDER BY src, pos")
        self.pieces_sql = q("SELECT data, embedding FROM {s}.pieces WHERE namespace = %s AND unit_key = %s "
                            "ORDER BY idx")
        self.iter_pieces_sql = q("SELECT data, embedding FROM {s}.pieces WHERE namespace = %s ORDER BY seq, idx")
        self.get_merged_sql = q("SELECT data FROM {s}.merged WHERE namespace = %s AND key = %s")
        self.stored_keys = q("SELECT key FROM {s}.units WHERE namespace = %s AND key = ANY(%s) UNION "
                             "SELECT key FROM {s}.merged WHERE namespace = %s AND key = ANY(%s)")
        self.version_sql = q("SELECT (SELECT COALESCE(MAX(seq), 0) FROM {s}.notes WHERE namespace = %s), "
                             "(SELECT COALESCE(MAX(deletions), 0) FROM {s}.namespace_deletions WHERE namespace = %s)")
        self.all_merged_sql = q("SELECT data FROM {s}.merged WHERE namespace = %s ORDER BY key")
        self.get_snapshot_sql = q("SELECT data FROM {s}.index_snapshots WHERE namespace = %s")
        self.get_request_state_sql = q("SELECT data FROM {s}.request_states WHERE namespace = %s")
        self.namespaces_sql = q("SELECT namespace FROM {s}.units GROUP BY namespace ORDER BY MIN(seq)")
        self.covers_sql = q("SELECT merged_key, covered FROM {s}.merged_covers WHERE namespace = %s")

    def _deletes(self, q: Callable[[str], Any]) -> None:
        """The statements that delete rows."""
        self.delete_snapshot_sql = q("DELETE FROM {s}.index_snapshots WHERE namespace = %s")
        self.delete_request_state_sql = q("DELETE FROM {s}.request_states WHERE namespace = %s")
        self.delete_unit_sql = q("DELETE FROM {s}.units WHERE namespace = %s AND key = %s RETURNING seq")
        self.delete_unit_rows = (
            q("DELETE FROM {s}.notes WHERE namespace = %s AND key = %s"),
            q("DELETE FROM {s}.pieces WHERE namespace = %s AND unit_key = %s"),
            q("DELETE FROM {s}.links WHERE namespace = %s AND src = %s"),
            q("DELETE FROM {s}.links WHERE namespace = %s AND dst = %s"),
        )
        self.delete_merged = (q("DELETE FROM {s}.merged WHERE namespace = %s AND key = ANY(%s)"),
                              q("DELETE FROM {s}.merged_covers WHERE namespace = %s AND merged_key = ANY(%s)"))
        self.delete_namespace_sql = q("DELETE FROM {s}.units WHERE namespace = %s")
        self.delete_namespace_rows = tuple(q(f"DELETE FROM {{s}}.{t} WHERE namespace = %s")
                                           for t in ("notes", "pieces", "links", "merged", "merged_covers",
                                                     "index_snapshots", "request_states",
                                                     "namespace_deletions"))

    def _lock(self, namespace: str) -> Call:
        """Serialises writers of one namespace until the transaction ends."""
        return Call(_LOCK, (f"flexamem/{self.schema}/{namespace}",))

    # schema

    def migrate(self) -> Plan[int]:
        """Create or upgrade the tables; returns the schema version. Many workers may race."""
        q = self._q
        yield Call(_LOCK, (f"flexamem-migrate/{self.schema}",))
        yield Call(q("CREATE SCHEMA IF NOT EXISTS {s}"))
        yield Call(q("CREATE TABLE IF NOT EXISTS {s}.schema_version (version INTEGER NOT NULL)"))
        current = _first_value((yield Call(q("SELECT MAX(version) FROM {s}.schema_version")))) or 0
        if current > SCHEMA_VERSION:
            raise SchemaVersionError(f"PostgreSQL schema {self.schema!r} has version {current}; this "
                                     f"FlexA-Mem reads up to {SCHEMA_VERSION}: upgrade flexamem")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                yield Call(q(statement))
            yield Call(q("INSERT INTO {s}.schema_version (version) VALUES (%s)"), (version,))
        return max(current, SCHEMA_VERSION)

    # writes

    def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> Plan[bool]:
        check_namespace(namespace)
        plist = codec.check_write(unit, note, pieces)
        return self._write_unit(namespace, unit, note, plist)

    def _write_unit(self, ns: str, unit: Unit, note: Note, plist: list[Piece]) -> Plan[bool]:
        yield self._lock(ns)
        seq = _first_value((yield Call(self.insert_unit, (ns, unit.key, unit.parent, codec.unit_text(unit)))))
        if seq is None:
            return False  # write-once: already stored
        yield Call(self.insert_note, (ns, unit.key, seq, codec.note_text(note),
                                      codec.embedding_bytes(note.embedding)))
        yield Call(self.insert_link, [(ns, unit.key, i, d) for i, d in enumerate(note.links)], many=True)
        yield Call(self.insert_piece, [(ns, unit.key, p.index, seq, codec.piece_text(p),
                                        codec.piece_vector_bytes(p)) for p in plist], many=True)
        return True

    def put_piece_vectors(self, namespace: str, unit_key: str, vectors: Mapping[int, np.ndarray]) -> Plan[None]:
        check_namespace(namespace)
        rows = codec.fill_vectors(vectors)
        return self._put_piece_vectors(namespace, unit_key, rows)

    def _put_piece_vectors(self, ns: str, unit_key: str, rows: dict[int, np.ndarray]) -> Plan[None]:
        yield Call(self.fill_piece_vector, [(codec.embedding_bytes(v), ns, unit_key, i) for i, v in rows.items()],
                   many=True)

    def put_merged(self, namespace: str, merged: MergedRecord) -> Plan[None]:
        check_namespace(namespace)
        return self._put_merged(namespace, merged)

    def _put_merged(self, ns: str, merged: MergedRecord) -> Plan[None]:
        covers = sorted(set(merged.covers))
        yield self._lock(ns)
        stored = yield Call(self.stored_keys, (ns, covers, ns, covers))
        if len(stored) < len(covers):
            return  # something it covers was deleted meanwhile: never store its text
        if (yield Call(self.insert_merged, (ns, merged.key, codec.merged_text(merged)))):
            yield Call(self.insert_cover, [(ns, merged.key, c) for c in covers], many=True)

    # reads

    def has_unit(self, namespace: str, key: str) -> Plan[bool]:
        check_namespace(namespace)
        return self._rows(self.has_unit_sql, (namespace, key), bool)

    def get_unit(self, namespace: str, key: str) -> Plan[Unit]:
        check_namespace(namespace)
        return self._get_unit(namespace, key)

    def _get_unit(self, namespace: str, key: str) -> Plan[Unit]:
        data = _first_value((yield Call(self.get_unit_sql, (namespace, key))))
        if data is None:
            raise KeyError(f"no unit {key!r} in namespace {namespace!r}")
        return codec.unit_from_text(data)

    def notes(self, namespace: str) -> Plan[list[Note]]:
        check_namespace(namespace)
        return self._notes(namespace)

    def _notes(self, namespace: str) -> Plan[list[Note]]:
        return (yield from self._keys_and_notes_from(namespace, 0))[1]

    def keys_and_notes_from(self, namespace: str, start: int) -> Plan[tuple[list[str], list[Note]]]:
        check_namespace(namespace)
        return self._keys_and_notes_from(namespace, max(0, int(start)))

    def _keys_and_notes_from(self, namespace: str, start: int) -> Plan[tuple[list[str], list[Note]]]:
        yield Call("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # keys, notes and links: one snapshot
        keys = [r[0] for r in (yield Call(self.note_keys_sql, (namespace,)))]
        rows = yield Call(self.notes_from_sql, (namespace, start), binary=True)
        link_rows = yield (Call(self.links_sql, (namespace,)) if start == 0 else
                           Call(self.links_from_sql, (namespace, namespace, start)))
        return keys, codec.notes_from_rows(rows, link_rows)

    def parents(self, namespace: str) -> Plan[dict[str, str | None]]:
        check_namespace(namespace)
        return self._rows(self.parents_sql, (namespace,), dict)

    def pieces(self, namespace: str, unit_key: str) -> Plan[list[Piece]]:
        check_namespace(namespace)
        return self._rows(self.pieces_sql, (namespace, unit_key), _pieces)

    def iter_pieces(self, namespace: str) -> Plan[list[Piece]]:
        check_namespace(namespace)
        return self._rows(self.iter_pieces_sql, (namespace,), _pieces)

    def get_merged(self, namespace: str, key: str) -> Plan[MergedRecord | None]:
        check_namespace(namespace)
        return self._rows(self.get_merged_sql, (namespace, key),
                          lambda rows: codec.merged_from_text(rows[0][0]) if rows else None)

    def namespace_version(self, namespace: str) -> Plan[str]:
        check_namespace(namespace)
        return self._rows(self.version_sql, (namespace, namespace), lambda rows: f"{rows[0][0]}.{rows[0][1]}")

    def merged_records(self, namespace: str) -> Plan[list[MergedRecord]]:
        check_namespace(namespace)
        return self._rows(self.all_merged_sql, (namespace,),
                          lambda rows: [codec.merged_from_text(r[0]) for r in rows])

    def get_index_snapshot(self, namespace: str) -> Plan[bytes | None]:
        check_namespace(namespace)
        return self._rows(self.get_snapshot_sql, (namespace,),
                          lambda rows: bytes(rows[0][0]) if rows else None, binary=True)

    def put_index_snapshot(self, namespace: str, data: bytes) -> Plan[None]:
        check_namespace(namespace)
        return self._put_snapshot(namespace, data)

    def _put_snapshot(self, ns: str, data: bytes) -> Plan[None]:
        yield self._lock(ns)
        yield Call(self.put_snapshot_sql, (ns, data))

    def get_request_state(self, namespace: str) -> Plan[bytes | None]:
        check_namespace(namespace)
        return self._rows(self.get_request_state_sql, (namespace,),
                          lambda rows: bytes(rows[0][0]) if rows else None, binary=True)

    def put_request_state(self, namespace: str, data: bytes) -> Plan[None]:
        check_namespace(namespace)
        return self._put_request_state(namespace, data)

    def _put_request_state(self, ns: str, data: bytes) -> Plan[None]:
        yield Call(self.put_request_state_sql, (ns, data))

    def namespaces(self) -> Plan[list[str]]:
        return self._rows(self.namespaces_sql, (), lambda rows: [r[0] for r in rows])

    @staticmethod
    def _rows(statement: Any, params: Sequence[Any], decode: Callable[[list[tuple]], T],
              binary: bool = False) -> Plan[T]:
        return decode((yield Call(statement, params, binary=binary)))

    # forgetting

    def delete_unit(self, namespace: str, key: str) -> Plan[bool]:
        check_namespace(namespace)
        return self._delete_unit(namespace, key)

    def _delete_unit(self, ns: str, key: str) -> Plan[bool]:
        yield self._lock(ns)
        if not (yield Call(self.delete_unit_sql, (ns, key))):
            return False
        for statement in self.delete_unit_rows:
            yield Call(statement, (ns, key))
        yield Call(self.delete_snapshot_sql, (ns,))
        yield Call(self.delete_request_state_sql, (ns,))
        yield Call(self.count_deletion_sql, (ns,))
        covers: dict[str, list[str]] = {}
        for mkey, covered in (yield Call(self.covers_sql, (ns,))):
            covers.setdefault(mkey, []).append(covered)
        dropped = sorted(merged_covering(covers, [key]))
        if dropped:
            for statement in self.delete_merged:
                yield Call(statement, (ns, dropped))
        return True

    def delete_namespace(self, namespace: str) -> Plan[int]:
        check_namespace(namespace)
        return self._delete_namespace(namespace)

    def _delete_namespace(self, ns: str) -> Plan[int]:
        yield self._lock(ns)
        deleted = yield Call(self.delete_namespace_sql, (ns,))
        for statement in self.delete_namespace_rows:
            yield Call(statement, (ns,))
        return deleted


def _pieces(rows: list[tuple]) -> list[Piece]:
    return [codec.piece_from_text(data, vec) for data, vec in rows]
