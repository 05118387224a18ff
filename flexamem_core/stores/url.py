"""Stores by name: one registry of URL schemes, so any adapter can save and reopen a store.

=====================================  ============================================
``memory://``                          a new :class:`InMemoryStore`
``memory://<id>``                      the live in-memory store of that id in this process
                                       (a new empty one elsewhere)
``sqlite:///relative/or/abs.db``       :class:`SQLiteStore` (``sqlite:////abs.db`` too)
``/path/to/file.db`` or ``x.sqlite``   :class:`SQLiteStore` (a bare path)
``postgresql://user@host/db?schema=s`` :class:`PostgresStore` (``postgres://`` too); ``schema``
                                       (default ``flexamem``), ``pool_min``, ``pool_max`` are
                                       ours, every other parameter goes to libpq
``chroma:///path/to/dir``              embedded :class:`ChromaStore`
``chroma+http://host:port``            :class:`ChromaStore` on a ``chroma run`` server
                                       (``chroma+https://`` too); ``?prefix=name``
=====================================  ============================================

A third-party backend adds its scheme with :func:`register_store`; every bundled store
knows its own URL (``store.url``), and :func:`store_url` gives the URL any store reopens
under, so a memory handle serialised in one process reopens the same data in another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ..model.protocols import Store
from .errors import StoreURLError
from .memory import MEMORY_SCHEME, InMemoryStore

__all__ = ["StoreURLError", "open_store", "register_store", "registered_schemes", "store_url"]

#: ``opener(url, **kwargs)`` returns the store the URL names.
Opener = Callable[..., Store]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_lock = threading.Lock()
_openers: dict[str, Opener] = {}
#: In-memory stores that were asked for their URL, so the URL reopens them in this process
#: (held for the life of the process, as a serialised handle may be reopened at any time).
_live_memory: dict[str, InMemoryStore] = {}


def register_store(scheme: str, opener: Opener, *, replace: bool = False) -> None:
    """Teach :func:`open_store` a URL scheme (``"redis"`` for ``redis://...``)."""
    if not isinstance(scheme, str) or not scheme or "://" in scheme or scheme != scheme.strip():
        raise StoreURLError(f"a scheme is a bare name such as 'redis', not {scheme!r}")
    if not callable(opener):
        raise TypeError(f"opener must be callable, not {type(opener).__name__}")
    key = scheme.lower()
    with _lock:
        if key in _openers and not replace:
            raise StoreURLError(f"scheme {key!r} is already registered (pass replace=True to override)")
        _openers[key] = opener


def registered_schemes() -> list[str]:
    with _lock:
        return sorted(_openers)


def open_store(url: str, **kwargs: Any) -> Store:
    """Open the store a URL names; ``kwargs`` go to the backend's constructor."""
    if not isinstance(url, str) or not url.strip():
        raise StoreURLError(f"store URL must be a non-empty string, got {url!r}")
    url = url.strip()
    if "://" not in url:
        if url.lower().endswith(_SQLITE_SUFFIXES):
            from .sqlite import SQLiteStore

            return SQLiteStore(url, **kwargs)
        raise StoreURLError(f"store URL {url!r} must look like 'scheme://location' or a .db path")
    scheme = url.split("://", 1)[0].lower()
    with _lock:
        opener = _openers.get(scheme)
    if opener is None:
        raise StoreURLError(f"unknown store URL {url!r}: registered schemes are "
                            f"{', '.join(registered_schemes())}; add one with register_store()")
    return opener(url, **kwargs)


def store_url(store: Store) -> str:
    """The URL ``store`` reopens under (its ``url``); an in-memory store stays reachable by it
    in this process from then on."""
    url = getattr(store, "url", None)
    if not isinstance(url, str) or "://" not in url:
        raise StoreURLError(f"{type(store).__name__} has no URL to reopen it by: give the memory a "
                            "store opened from a URL, or register its scheme with register_store()")
    if isinstance(store, InMemoryStore):
        with _lock:
            _live_memory[url] = store
    return url


def _open_memory(url: str, **kwargs: Any) -> InMemoryStore:
    if kwargs:
        raise TypeError(f"InMemoryStore takes no options, got {sorted(kwargs)}")
    rest = url.split("://", 1)[1]
    if not rest:
        return InMemoryStore()
    with _lock:
        live = _live_memory.get(url)
        if live is None:  # another process, or a store that is gone: the same URL, empty
            live = InMemoryStore(store_id=rest)
            _live_memory[url] = live
        return live


def _open_sqlite(url: str, **kwargs: Any) -> Store:
    # sqlite:///rel.db -> rel.db ; sqlite:////abs.db -> /abs.db ; sqlite:///:memory: -> :memory:
    rest = url[len("sqlite://"):]
    if not rest.startswith("/"):
        raise StoreURLError(f"SQLite URL must look like sqlite:///path.db, got {url!r}")
    path = unquote(rest[1:].split("?", 1)[0])
    if not path:
        raise StoreURLError(f"SQLite URL names no file: {url!r}")
    from .sqlite import SQLiteStore

    return SQLiteStore(path, **kwargs)


def _open_postgres(url: str, **kwargs: Any) -> Store:
    from .postgres import PostgresStore, split_url

    conninfo, options = split_url(url)
    options.setdefault("schema", "flexamem")
    return PostgresStore(conninfo, **{**options, **kwargs})


def _open_chroma(url: str, **kwargs: Any) -> Store:
    from .chroma import ChromaStore

    scheme = url.split("://", 1)[0].lower()
    parts = urlsplit(url)
    params = dict(parse_qsl(parts.query))
    prefix = params.pop("prefix", "flexamem")
    if params:
        raise StoreURLError(f"unknown Chroma URL parameters: {sorted(params)}")
    if scheme == "chroma":
        path = unquote(parts.path)
        if parts.netloc or not path:
            raise StoreURLError(f"embedded Chroma URL must look like chroma:///path/to/dir, got {url!r}")
        return ChromaStore(path, prefix=prefix, **kwargs)
    if not parts.hostname:
        raise StoreURLError(f"Chroma server URL names no host: {url!r}")
    return ChromaStore(host=parts.hostname, port=parts.port or 8000, ssl=scheme == "chroma+https",
                       prefix=prefix, **kwargs)


for _scheme, _opener in ((MEMORY_SCHEME, _open_memory), ("sqlite", _open_sqlite),
                         ("postgresql", _open_postgres), ("postgres", _open_postgres),
                         ("chroma", _open_chroma), ("chroma+http", _open_chroma),
                         ("chroma+https", _open_chroma)):
    register_store(_scheme, _opener)
