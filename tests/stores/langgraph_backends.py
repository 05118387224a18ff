"""LangGraph ``BaseStore`` backends for the store conformance suite.

``LangGraphBaseStore`` (the LangGraph adapter's FlexA-Mem store) wrapping langgraph's own
``InMemoryStore`` and ``SqliteStore``. The SQLite one is named by a test-only URL,
``langgraph+sqlite:///path.db``, so the worker processes of the restart and crash tests
can open it exactly as the suite does; every other URL goes to ``open_store``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from flexamem_core.stores import open_store

LANGGRAPH_SQLITE = "langgraph+sqlite:///"


def langgraph_memory() -> Any:
    """A FlexA-Mem store on a fresh langgraph ``InMemoryStore``."""
    from flexamem_langgraph import LangGraphBaseStore
    from langgraph.store.memory import InMemoryStore

    return LangGraphBaseStore(InMemoryStore())


def langgraph_sqlite(path: str | Path) -> Any:
    """A FlexA-Mem store on a langgraph ``SqliteStore`` over ``path``; ``close()`` closes it."""
    from flexamem_langgraph import LangGraphBaseStore
    from langgraph.store.sqlite import SqliteStore

    class OwningLangGraphStore(LangGraphBaseStore):
        """Owns the SQLite connection it was opened on, as an application would."""

        def close(self) -> None:
            self.store.conn.close()

    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    # WAL as a deployment would use it, and secure_delete off as in SQLite builds that do
    # not default it on: forgetting must still leave no deleted text in the file or the WAL
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA secure_delete = OFF")
    store = SqliteStore(conn)
    store.setup()
    return OwningLangGraphStore(store)


def open_url(url: str) -> Any:
    """``open_store(url)``, plus the test-only ``langgraph+sqlite:///path.db``."""
    if url.startswith(LANGGRAPH_SQLITE):
        return langgraph_sqlite(url[len(LANGGRAPH_SQLITE):])
    return open_store(url)


def sqlite_path(url: str) -> str:
    """The database file of a ``sqlite:///`` or ``langgraph+sqlite:///`` URL."""
    return url.split(":///", 1)[1]
