"""Open a store from one string, so an adapter can save and reload a memory handle.

=====================================  ============================================
``memory://``                          a new :class:`InMemoryStore`
``sqlite:///relative/or/abs.db``       :class:`SQLiteStore` (``sqlite:////abs.db`` too)
``/path/to/file.db`` or ``x.sqlite``   :class:`SQLiteStore` (a bare path)
``postgresql://user@host/db?schema=s`` :class:`PostgresStore` (``postgres://`` too); ``schema``
                                       (default ``flexamem``), ``pool_min``, ``pool_max`` are
                                       ours, every other parameter goes to libpq
``chroma:///path/to/dir``              embedded :class:`ChromaStore`
``chroma+http://host:port``            :class:`ChromaStore` on a ``chroma run`` server
                                       (``chroma+https://`` too); ``?prefix=name``
=====================================  ============================================
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..protocols import Store
from .memory import InMemoryStore

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class StoreURLError(ValueError):
    """Raised for a store URL that names no known backend or is malformed."""


def _int(params: dict[str, str], name: str, default: int) -> int:
    value = params.pop(name, None)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise StoreURLError(f"{name} must be an integer, got {value!r}") from None


def _sqlite_path(url: str) -> str:
    # sqlite:///rel.db -> rel.db ; sqlite:////abs.db -> /abs.db ; sqlite:///:memory: -> :memory:
    rest = url[len("sqlite://"):]
    if not rest.startswith("/"):
        raise StoreURLError(f"SQLite URL must look like sqlite:///path.db, got {url!r}")
    path = unquote(rest[1:].split("?", 1)[0])
    if not path:
        raise StoreURLError(f"SQLite URL names no file: {url!r}")
    return path


def open_store(url: str, **kwargs: Any) -> Store:
    """Open the store a URL names; ``kwargs`` go to the backend's constructor."""
    if not isinstance(url, str) or not url.strip():
        raise StoreURLError(f"store URL must be a non-empty string, got {url!r}")
    url = url.strip()
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "memory":
        return InMemoryStore()
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(_sqlite_path(url), **kwargs)
    if not scheme and url.lower().endswith(_SQLITE_SUFFIXES):
        from .sqlite import SQLiteStore

        return SQLiteStore(url, **kwargs)
    if scheme in {"postgresql", "postgres"}:
        from .postgres import PostgresStore

        parts = urlsplit(url)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        options: dict[str, Any] = {"schema": params.pop("schema", "flexamem"),
                                   "min_size": _int(params, "pool_min", 1),
                                   "max_size": _int(params, "pool_max", 8)}
        conninfo = urlunsplit(parts._replace(query=urlencode(params)))
        return PostgresStore(conninfo, **{**options, **kwargs})
    if scheme in {"chroma", "chroma+http", "chroma+https"}:
        from .chroma import ChromaStore

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
    raise StoreURLError(
        f"unknown store URL {url!r}: use memory://, sqlite:///file.db, postgresql://..., "
        "chroma:///dir or chroma+http://host:port")
