"""Store locations as strings, so a serialised memory can find its store again.

A ``FlexAMemory`` serialises as a handle: namespace, config and a store URL. The URLs are
the core's (``flexamem_core.stores``): ``store_url(store)`` for a store object,
``open_store(url)`` to reopen it, ``register_store(scheme, opener)`` for another backend.
A ``memory://<id>`` URL reopens the live in-memory store in the same process; elsewhere it
opens an empty one and the notes are rebuilt from the chat log on the next render
(ingestion is idempotent). The names below are kept for existing imports.
"""

from __future__ import annotations

from collections.abc import Callable

from flexamem_core import Store
from flexamem_core.stores import StoreURLError, open_store, register_store, store_url

__all__ = ["StoreURLError", "open_store", "register_opener", "url_for"]


def register_opener(scheme: str, opener: Callable[[str], Store]) -> None:
    """Same as :func:`flexamem_core.stores.register_store` (replacing an earlier opener)."""
    register_store(scheme, opener, replace=True)


def url_for(store: Store, url: str | None = None) -> str:
    """The URL ``store`` reopens under: ``url`` when given (checked to name it), else its own."""
    own = store_url(store)
    if url is not None and url != own:
        raise StoreURLError(f"{url!r} does not name this store (its URL is {own!r})")
    return own
