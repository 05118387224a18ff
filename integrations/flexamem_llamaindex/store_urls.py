"""Store locations as strings, so a serialised memory can find its store again.

A ``FlexAMemory`` serialises as a handle: namespace, config and a store URL. This module
turns store objects into URLs and URLs back into store objects:

- ``memory://<id>``: an ``InMemoryStore`` registered in this process. It reopens only in
  the same process; elsewhere a fresh empty store is registered under the same URL and
  the notes are rebuilt from the chat log on the next render (ingestion is idempotent).
- any other scheme (``sqlite:///path.db``, ``postgresql://...``): opened by an opener
  registered with :func:`register_opener`, or by ``flexamem_core.stores.open_store`` once
  the core provides one.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from flexamem_core import InMemoryStore, Store

MEMORY_SCHEME = "memory"

_lock = threading.Lock()
_open_stores: dict[str, Store] = {}
_urls_by_store: dict[int, str] = {}
_openers: dict[str, Callable[[str], Store]] = {}


class StoreURLError(ValueError):
    """Raised for a store URL that no registered backend can open."""


def scheme_of(url: str) -> str:
    if not isinstance(url, str) or "://" not in url:
        raise StoreURLError(f"store URL {url!r} must look like 'scheme://location' (e.g. memory://, sqlite:///x.db)")
    return url.split("://", 1)[0].lower()


def register_opener(scheme: str, opener: Callable[[str], Store]) -> None:
    """Teach :func:`open_store` a backend: ``opener(url)`` returns a ``Store`` for that URL."""
    _openers[scheme.lower()] = opener


def url_for(store: Store, url: str | None = None) -> str:
    """The URL a store reopens under; registers it (a new ``memory://`` id when none is given)."""
    with _lock:
        known = _urls_by_store.get(id(store))
        if known is not None and (url is None or url == known):
            return known
        if url is None:
            url = getattr(store, "url", None) or f"{MEMORY_SCHEME}://{uuid.uuid4().hex}"
        scheme_of(url)
        _open_stores[url] = store
        _urls_by_store[id(store)] = url
        return url


def open_store(url: str) -> Store:
    """The store behind ``url``: the live object in this process, else opened by scheme."""
    scheme = scheme_of(url)
    with _lock:
        live = _open_stores.get(url)
    if live is not None:
        return live
    if scheme == MEMORY_SCHEME:
        store: Store = InMemoryStore()  # another process: notes are rebuilt from the chat log
    elif scheme in _openers:
        store = _openers[scheme](url)
    else:
        store = _open_with_core(url)
    return _remember(url, store)


def _remember(url: str, store: Store) -> Store:
    with _lock:
        live = _open_stores.setdefault(url, store)
        _urls_by_store[id(live)] = url
        return live


def _open_with_core(url: str) -> Store:
    try:
        from flexamem_core import stores as core_stores
    except ImportError:  # pragma: no cover - the core always has stores
        core_stores = None
    opener = getattr(core_stores, "open_store", None)
    if opener is None:
        raise StoreURLError(
            f"no store backend can open {url!r}: register one with "
            "flexamem_llamaindex.register_opener(scheme, opener) or use memory://")
    return opener(url)
