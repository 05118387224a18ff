"""Store backends behind the :class:`~flexamem_core.model.protocols.Store` protocol.

``InMemoryStore`` is always available. The persistent backends import their driver lazily:
``SQLiteStore`` (stdlib), ``PostgresStore`` (psycopg 3, extra ``postgres``) and
``ChromaStore`` (chromadb, extra ``chroma``). ``open_store(url)`` opens any of them,
``register_store(scheme, opener)`` adds a backend, and ``store_url(store)`` is the URL a
store reopens under.
"""

from __future__ import annotations

from typing import Any

from .errors import StoreURLError
from .forgetting import ForgettingStore, forget_tenant
from .memory import InMemoryStore
from .names import NamespaceError, check_namespace
from .url import open_store, register_store, registered_schemes, store_url

__all__ = [
    "AsyncPostgresStore",
    "ChromaStore",
    "ForgettingStore",
    "InMemoryStore",
    "NamespaceError",
    "PostgresStore",
    "SQLiteStore",
    "StoreURLError",
    "check_namespace",
    "forget_tenant",
    "open_store",
    "register_store",
    "registered_schemes",
    "store_url",
]

_LAZY = {
    "SQLiteStore": ".sqlite",
    "PostgresStore": ".postgres",
    "AsyncPostgresStore": ".postgres",
    "ChromaStore": ".chroma",
}


def __getattr__(name: str) -> Any:
    """Import a backend module only when its class is asked for (drivers are optional)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
