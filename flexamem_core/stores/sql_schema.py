"""The relational schema shared by the SQLite and PostgreSQL stores: one definition, two dialects."""

from __future__ import annotations

from string import Template

SCHEMA_VERSION = 5

_V1 = [
    """CREATE TABLE ${p}units (
        seq $seq_pk,
        namespace TEXT NOT NULL, key TEXT NOT NULL, parent TEXT, data TEXT NOT NULL,
        UNIQUE (namespace, key))""",
    """CREATE TABLE ${p}notes (
        namespace TEXT NOT NULL, key TEXT NOT NULL, seq $int NOT NULL,
        data TEXT NOT NULL, embedding $blob NOT NULL, PRIMARY KEY (namespace, key))""",
    "CREATE INDEX notes_by_seq ON ${p}notes (namespace, seq)",
    """CREATE TABLE ${p}links (
        namespace TEXT NOT NULL, src TEXT NOT NULL, pos INTEGER NOT NULL, dst TEXT NOT NULL,
        PRIMARY KEY (namespace, src, pos))""",
    "CREATE INDEX links_by_dst ON ${p}links (namespace, dst)",
    """CREATE TABLE ${p}pieces (
        namespace TEXT NOT NULL, unit_key TEXT NOT NULL, idx INTEGER NOT NULL,
        seq $int NOT NULL, data TEXT NOT NULL, PRIMARY KEY (namespace, unit_key, idx))""",
    "CREATE INDEX pieces_by_seq ON ${p}pieces (namespace, seq, idx)",
    """CREATE TABLE ${p}merged (
        namespace TEXT NOT NULL, key TEXT NOT NULL, data TEXT NOT NULL,
        PRIMARY KEY (namespace, key))""",
    """CREATE TABLE ${p}merged_covers (
        namespace TEXT NOT NULL, merged_key TEXT NOT NULL, covered TEXT NOT NULL,
        PRIMARY KEY (namespace, merged_key, covered))""",
    "CREATE INDEX merged_covers_by_covered ON ${p}merged_covers (namespace, covered)",
]

# Version 2: the saved search index of a namespace (``index_snapshot``, derived data) and a
# per-namespace deletion counter (``NamespaceVersions``).
_V2 = [
    """CREATE TABLE ${p}index_snapshots (
        namespace TEXT NOT NULL PRIMARY KEY, data $blob NOT NULL)""",
    # Units deleted one by one per namespace: with the newest seq, the namespace's version.
    """CREATE TABLE ${p}namespace_deletions (
        namespace TEXT NOT NULL PRIMARY KEY, deletions $int NOT NULL)""",
]

# Version 3: each piece's own vector (raw float32, written with its unit; NULL in a piece
# stored without one, which falls back to its note's vector).
_V3 = [
    "ALTER TABLE ${p}pieces ADD COLUMN embedding $blob",
]

# Version 4: what a reopen reads, from indexes alone: the chain of a namespace (each unit's
# key and parent, in write order) and its notes' keys in write order. Read from the tables,
# they would take every unit's text and every note's row, slow with the file not in the
# page cache.
_V4 = [
    "CREATE INDEX IF NOT EXISTS units_chain ON ${p}units (namespace, seq, key, parent)",
    "CREATE INDEX IF NOT EXISTS notes_keys ON ${p}notes (namespace, seq, key)",
]

# Version 5: the previous cache-stable request of each namespace (``RequestStates``), so
# every process serving a thread continues the same prompt prefix.
_V5 = [
    """CREATE TABLE IF NOT EXISTS ${p}request_states (
        namespace TEXT NOT NULL PRIMARY KEY, data $blob NOT NULL)""",
]

_DIALECTS = {
    "sqlite": {"p": "", "seq_pk": "INTEGER PRIMARY KEY AUTOINCREMENT", "int": "INTEGER", "blob": "BLOB"},
    # PostgreSQL statements keep a {s} placeholder that the store fills with its quoted schema.
    "postgres": {"p": "{s}.", "seq_pk": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
                 "int": "BIGINT", "blob": "BYTEA"},
}


def migrations(dialect: str) -> dict[int, list[str]]:
    """Migrations by target version for ``sqlite`` or ``postgres``; each list is one transaction."""
    words = _DIALECTS[dialect]
    return {version: [Template(statement).substitute(words) for statement in statements]
            for version, statements in ((1, _V1), (2, _V2), (3, _V3), (4, _V4), (5, _V5))}
