"""open_store: every URL form opens the right backend; bad URLs get a clear error."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import chroma_url, postgres_url
from storekit import make_chain

from flexamem_core.stores import InMemoryStore, open_store
from flexamem_core.stores.sqlite import SCHEMA_VERSION, SchemaVersionError, SQLiteStore
from flexamem_core.stores.url import StoreURLError


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
