"""open_store: every URL form opens the right backend; bad URLs get a clear error."""

from __future__ import annotations

import sqlite3

import pytest

from flexamem_core.stores import InMemoryStore, open_store
from flexamem_core.stores.sqlite import (
    NOTE_KEYS_SQL,
    PARENTS_SQL,
    SCHEMA_VERSION,
    SchemaVersionError,
    SQLiteStore,
)
from flexamem_core.stores.url import StoreURLError
from flexamem_core.testing.storekit import make_chain
from tests.services import chroma_url, postgres_url


def test_memory_url_gives_a_fresh_store():
    a, b = open_store("memory://"), open_store("memory://")
    assert isinstance(a, InMemoryStore) and a is not b


@pytest.mark.parametrize("form", ["sqlite:///{p}", "{p}"])
def test_sqlite_urls_and_bare_paths_open_the_same_file(tmp_path, form):
    path = tmp_path / "m.db"
    first = open_store(form.format(p=path))
    assert isinstance(first, SQLiteStore)
    first.write_unit("ns", *make_chain("u", 1)[0])
    first.close()
    assert len(open_store(f"sqlite:///{path}").notes("ns")) == 1
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION


#: What schema version 4 added, undone (a file of version 3).
_UNDO_V4 = ["DROP INDEX units_chain", "DROP INDEX notes_keys"]


def _written_as_version(tmp_path, chain, version: int, undo: list[str]):
    """A SQLite file holding ``chain`` as a FlexA-Mem of schema ``version`` left it: written
    with the current schema, ``undo`` run, and the versions after it forgotten."""
    path = tmp_path / f"v{version}.db"
    store = open_store(f"sqlite:///{path}")
    for triple in chain:
        store.write_unit("ns", *triple)
    store.close()
    conn = sqlite3.connect(path)
    for statement in undo:
        conn.execute(statement)
    conn.execute("DELETE FROM schema_version WHERE version > ?", (version,))
    conn.commit()
    conn.close()
    return path


def test_sqlite_of_schema_version_1_is_upgraded_in_place(tmp_path):
    """A file written before index snapshots (version 1) keeps its units and gains the table."""
    chain = make_chain("old", 2)
    path = _written_as_version(tmp_path, chain, 1, [*_UNDO_V4, "DROP TABLE index_snapshots",
                                                    "DROP TABLE namespace_deletions",
                                                    "ALTER TABLE pieces DROP COLUMN embedding"])
    upgraded = open_store(f"sqlite:///{path}")
    assert [n.unit_key for n in upgraded.notes("ns")] == [t[0].key for t in chain]
    assert upgraded.schema_version == SCHEMA_VERSION == 5
    upgraded.put_index_snapshot("ns", b"x")
    assert upgraded.get_index_snapshot("ns") == b"x"
    assert all(p.embedding is None for p in upgraded.iter_pieces("ns"))  # written before piece vectors
    new = make_chain("new", 1, parent=chain[-1][0].key, first_step=3, piece_vectors=True)[0]
    assert upgraded.write_unit("ns", *new)
    assert all(p.embedding is not None for p in upgraded.pieces("ns", new[0].key))


def test_sqlite_reads_the_chain_and_note_keys_from_indexes_alone(tmp_path):
    """Version 4: a reopen reads each unit's key and parent, and the note keys, from indexes,
    never the units' text nor the notes' rows (at 13,333 units with a cold page cache those
    reads were 2.2 s and 1.5 s of a reopen)."""
    chain = make_chain("c", 3)
    upgraded = SQLiteStore(_written_as_version(tmp_path, chain, 3, _UNDO_V4))
    assert upgraded.schema_version == SCHEMA_VERSION
    assert upgraded.parents("ns") == {t[0].key: t[0].parent for t in chain}
    assert upgraded.keys_and_notes_from("ns", 3) == ([t[0].key for t in chain], [])
    for sql, index in ((PARENTS_SQL, "units_chain"), (NOTE_KEYS_SQL, "notes_keys")):
        plan = upgraded._connection().execute(f"EXPLAIN QUERY PLAN {sql}", ("ns",)).fetchall()
        assert any(f"COVERING INDEX {index}" in row[-1] for row in plan), plan


def test_sqlite_written_by_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "new.db"
    open_store(f"sqlite:///{path}").close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version VALUES (?)", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match="upgrade flexamem"):
        open_store(f"sqlite:///{path}")


@pytest.mark.parametrize("url, match", [
    ("", "non-empty"), ("redis://localhost", "unknown store URL"), ("sqlite://", "sqlite:///path"),
    ("sqlite:///", "names no file"), ("chroma://host/dir", "chroma:///path"),
    ("chroma+http://:80", "names no host"), ("chroma+http://h:1?x=1", "unknown Chroma URL parameters"),
    ("postgresql://h/db?pool_max=many", "pool_max must be an integer"),
])
def test_bad_urls_get_clear_errors(url, match):
    with pytest.raises(StoreURLError, match=match):
        open_store(url)


def test_missing_sqlite_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_store(f"sqlite:///{tmp_path}/no/such/dir/m.db")


def test_postgres_url_options_reach_the_store():
    from flexamem_core.stores.postgres import PostgresStore

    base = postgres_url()
    sep = "&" if "?" in base else "?"
    store = open_store(f"{base}{sep}schema=url_test&pool_max=3&connect_timeout=5")
    try:
        assert isinstance(store, PostgresStore) and store.schema == "url_test"
        assert "schema" not in store.conninfo and "connect_timeout=5" in store.conninfo
        with pytest.raises(ValueError, match="schema name"):
            open_store(f"{base}{sep}schema=Bad-Name")
    finally:
        import psycopg

        store.close()
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS url_test CASCADE")


def test_chroma_urls_open_embedded_and_server_stores(tmp_path):
    from flexamem_core.stores.chroma import ChromaStore

    embedded = open_store(f"chroma:///{tmp_path}/c?prefix=abc")
    assert isinstance(embedded, ChromaStore) and embedded.prefix == "abc"
    server = open_store(chroma_url() + "?prefix=urltest")
    assert isinstance(server, ChromaStore)
    assert server.client.heartbeat() > 0


def test_a_registered_scheme_opens_through_open_store(tmp_path):
    from flexamem_core.stores import register_store, registered_schemes

    opened = []

    def opener(url, **kwargs):
        opened.append((url, kwargs))
        return SQLiteStore(tmp_path / "custom.db")

    register_store("acmedb", opener)
    try:
        store = open_store("AcmeDB://bucket/x", timeout=5)
        assert isinstance(store, SQLiteStore) and opened == [("AcmeDB://bucket/x", {"timeout": 5})]
        assert "acmedb" in registered_schemes()
        with pytest.raises(StoreURLError, match="already registered"):
            register_store("acmedb", opener)
        register_store("acmedb", opener, replace=True)
    finally:
        from flexamem_core.stores import url as registry

        registry._openers.pop("acmedb", None)
    with pytest.raises(StoreURLError, match="registered schemes are"):
        open_store("acmedb://bucket/x")
    for bad in ("", "a://", " x"):
        with pytest.raises(StoreURLError):
            register_store(bad, opener)


def test_stores_know_their_url_and_reopen_by_it(tmp_path):
    from flexamem_core.stores import InMemoryStore, store_url

    path = tmp_path / "dir with space" / "m.db"
    path.parent.mkdir()
    sqlite = SQLiteStore(path)
    sqlite.write_unit("ns", *make_chain("u", 1)[0])
    url = store_url(sqlite)
    assert url.startswith("sqlite:////") and "%20" in url
    assert len(open_store(url).notes("ns")) == 1
    memory = InMemoryStore()
    memory.write_unit("ns", *make_chain("m", 1)[0])
    assert open_store(store_url(memory)) is memory  # the live object, in this process
    assert open_store("memory://never-seen").notes("ns") == []  # elsewhere: the same URL, empty
    assert open_store("memory://") is not open_store("memory://")
    with pytest.raises(StoreURLError, match="has no URL"):
        store_url(object())
