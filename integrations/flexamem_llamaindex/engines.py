"""One ``FlexAMem`` engine per (store URL, config), shared by every memory that uses them.

An engine holds the tokenizer, the embedder and the store's indexes; building one per
``FlexAMemory`` (or per deserialised copy of it) would reload models and re-read the
store. Engines built with a user's own tokenizer, embedder or writer are remembered
under the same key, so a memory restored from a saved context in this process renders
with exactly the parts it was created with.
"""

from __future__ import annotations

import threading

from flexamem_core import Embedder, FlexAMem, FlexAMemConfig, RecordWriter, Tokenizer
from flexamem_core.stores import open_store

_lock = threading.Lock()
_engines: dict[tuple[str, str], FlexAMem] = {}


def _key(url: str, config: FlexAMemConfig) -> tuple[str, str]:
    return url, config.model_dump_json()


def engine_for(url: str, config: FlexAMemConfig, *, tokenizer: Tokenizer | None = None,
               embedder: Embedder | None = None, writer: RecordWriter | None = None) -> FlexAMem:
    """The shared engine for a store URL and config; built on first use."""
    key = _key(url, config)
    custom = tokenizer is not None or embedder is not None or writer is not None
    with _lock:
        engine = _engines.get(key)
        if engine is not None and not custom:
            return engine
    store = open_store(url)
    engine = FlexAMem(config, store=store, tokenizer=tokenizer, embedder=embedder, writer=writer)
    with _lock:
        if custom:
            _engines[key] = engine
            return engine
        return _engines.setdefault(key, engine)


def register_engine(url: str, engine: FlexAMem) -> None:
    """Make ``engine`` the one used for its store URL and config (a user-built engine)."""
    with _lock:
        _engines[_key(url, engine.config)] = engine
