"""Backends of the store conformance suite: every test taking ``backend`` runs on each.

``Backend`` offers what ``flexamem_core.testing.StoreBackend`` does (``first``, ``open()``,
``persistent``, ``raw_dump``, ``examples``) plus the concurrency flags of the process tests.

``langgraph-memory`` and ``langgraph-sqlite`` are the LangGraph adapter's
``LangGraphBaseStore`` on langgraph's ``InMemoryStore`` and ``SqliteStore``
(``langgraph_backends.py``). PostgreSQL and Chroma-server tests need the services of ``.ci/services.sh``
(FLEXAMEM_TEST_POSTGRES_URL, FLEXAMEM_TEST_CHROMA_URL). Without a reachable server they
are skipped with the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import sqlite3
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from langgraph_backends import LANGGRAPH_SQLITE, langgraph_memory, open_url

from flexamem_core.stores import open_store
from tests.services import chroma_url, postgres_url

MAX_EXAMPLES = {"memory": 60, "sqlite": 30, "postgres": 15, "chroma": 8, "chroma-http": 8,
                "langgraph-memory": 40, "langgraph-sqlite": 20}


@dataclass
class Backend:
    """One backend under test: how to (re)open it, and how to read everything it holds raw."""

    name: str
    url: str | None  # None: not reachable from another process (in-memory)
    raw_dump: Callable[[Any], str]
    persistent: bool = True
    transactional: bool = True  # atomic units and safe concurrent writers
    multi_writer: bool = True  # several processes may append at once, each unit stored once
    piece_vectors: bool | None = True  # every bundled backend keeps each piece's own vector
    stores: list[Any] = field(default_factory=list)
    first: Any = None

    @property
    def examples(self) -> int:
        """Operation sequences of the model-based test (fewer on the slow servers)."""
        return MAX_EXAMPLES[self.name]

    def open(self) -> Any:
        """A new store object on the same data (the first call may return the shared one)."""
        store = open_url(self.url) if self.url else self.first
        self.stores.append(store)
        return store


def _close_all(backend: Backend) -> None:
    for s in backend.stores:
        close = getattr(s, "close", None)
        if close:
            close()


def _memory_dump(store: Any) -> str:
    return repr(store._spaces)  # the whole in-memory state


def _langgraph_memory_dump(store: Any) -> str:
    return repr(store.store._data) + repr(store.store._vectors)  # langgraph's whole state


def _sqlite_dump(path: Path) -> Callable[[Any], str]:
    def dump(_store: Any) -> str:
        conn = sqlite3.connect(path)
        try:
            text = "\n".join(conn.iterdump())
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            blobs = [v.decode("utf-8", "replace") for t in tables
                     for row in conn.execute(f'SELECT * FROM "{t}"') for v in row if isinstance(v, bytes)]
            text += "\n" + "\n".join(blobs)  # iterdump writes blobs (langgraph's JSON values) as hex
        finally:
            conn.close()
        raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        return text + "\n" + raw.decode("utf-8", "replace")

    return dump


def _postgres_dump(url: str, schema: str) -> Callable[[Any], str]:
    def dump(_store: Any) -> str:
        import psycopg
        from psycopg import sql

        with psycopg.connect(url) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))]
            return "\n".join(str(row[0]) for t in tables for row in conn.execute(
                sql.SQL("SELECT t::text FROM {}.{} t").format(sql.Identifier(schema), sql.Identifier(t))))

    return dump


def _chroma_dump(store: Any) -> str:
    out = []
    for col in store.client.list_collections():
        if col.name.startswith(store.prefix + "-"):
            got = col.get(include=["documents", "metadatas"])
            out.append(repr((got["ids"], got["documents"], got["metadatas"])))
    return "\n".join(out)


BACKENDS = ["memory", "sqlite", "postgres", "chroma", "chroma-http", "langgraph-memory", "langgraph-sqlite"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from _make_backend(request.param, tmp_path)


def _make_backend(name: str, tmp_path: Path) -> Iterator[Backend]:
    if name == "memory":
        b = Backend(name, None, _memory_dump, persistent=False)
        b.first = open_store("memory://")
        yield b
    elif name == "sqlite":
        path = tmp_path / "store.db"
        yield from _run(Backend(name, f"sqlite:///{path}", _sqlite_dump(path)))
    elif name == "postgres":
        base = postgres_url()
        schema = f"t_{uuid.uuid4().hex[:12]}"
        sep = "&" if "?" in base else "?"
        try:
            yield from _run(Backend(name, f"{base}{sep}schema={schema}", _postgres_dump(base, schema)))
        finally:
            import psycopg
            from psycopg import sql

            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    elif name == "chroma":
        yield from _run(Backend(name, f"chroma:///{tmp_path / 'chroma'}", _chroma_dump, transactional=False))
    elif name == "chroma-http":
        base = chroma_url()
        prefix = f"t{uuid.uuid4().hex[:12]}"
        b = Backend(name, f"{base}?prefix={prefix}", _chroma_dump, transactional=False)
        try:
            yield from _run(b)
        finally:
            store = open_store(b.url)
            for col in store.client.list_collections():
                if col.name.startswith(prefix + "-"):
                    store.client.delete_collection(col.name)
    elif name == "langgraph-memory":
        pytest.importorskip("langgraph.store.memory", reason="the langgraph extra is not installed")
        b = Backend(name, None, _langgraph_memory_dump, persistent=False)
        b.first = langgraph_memory()
        yield b
    elif name == "langgraph-sqlite":
        pytest.importorskip("langgraph.store.sqlite", reason="langgraph-checkpoint-sqlite is not installed")
        path = tmp_path / "langgraph.db"
        # a unit is one SQLite transaction (a BaseStore batch), but "is it stored?" and the
        # write are two calls: concurrent writers of the same unit can both write it
        yield from _run(Backend(name, f"{LANGGRAPH_SQLITE}{path}", _sqlite_dump(path), multi_writer=False))
    else:  # pragma: no cover
        raise ValueError(name)


def _run(b: Backend) -> Iterator[Backend]:
    b.first = open_url(b.url)
    try:
        yield b
    finally:
        _close_all(b)
