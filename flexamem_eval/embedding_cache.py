"""Embeddings cached on disk across evaluation runs, keyed by model name and text hash.

``flexamem eval`` embeds the same texts on every run (note texts, pieces, queries), and on
a CPU embedding is most of a cold run. :class:`CachedEmbedder` wraps any ``Embedder``
(the real :class:`~flexamem_core.index.embeddings.SentenceTransformerEmbedder` by default) and
keeps every vector it returns in an SQLite file: one row per (model, sha256 of the text
as UTF-8), the vector as its float32 bytes, so a vector read back is bit for bit the one
the model returned. Texts the file lacks are embedded in one call to the wrapped embedder
(which batches them) and appended in one transaction; rows are never rewritten. The file
is in WAL mode, so the worker processes of ``--workers N`` read and append to it at the
same time (a text two workers embed at once is stored by whichever commits first; both
vectors are the same model's output for the same text).

Default location ``~/.cache/flexamem/embeddings`` (``$XDG_CACHE_HOME/flexamem/embeddings``
when that is set); ``flexamem eval --embedding-cache DIR`` moves it, ``--no-embedding-cache``
turns it off.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flexamem_core.stores.sqlite import wal_connection

#: File name inside the cache directory.
DB_NAME = "embeddings.sqlite3"
#: Keys per ``SELECT ... IN (...)`` (SQLite allows 32,766 parameters; stay well below).
_CHUNK = 500


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/flexamem/embeddings``, else ``~/.cache/flexamem/embeddings``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flexamem" / "embeddings"


def text_key(text: str) -> bytes:
    """sha256 of the text as UTF-8 (lone surrogates kept distinct, not replaced)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def model_id(embedder: Any) -> str:
    """What identifies the model behind an embedder: its full model name (or path), else its
    name, with ``@bfloat16`` when it runs in that precision (its vectors differ slightly from
    float32's, and the cache promises the model's exact output)."""
    name = str(getattr(embedder, "model_name", None) or embedder.name)
    return f"{name}@bfloat16" if getattr(embedder, "precision", "float32") == "bfloat16" else name


class CachedEmbedder:
    """An ``Embedder`` that reads vectors from, and appends new ones to, an on-disk cache.

    ``hits`` and ``misses`` count texts (after removing duplicates within a call) found in
    the cache (memory or file) or embedded by the wrapped model. The last ``memory_size``
    vectors used are also kept in memory, so a text asked for again in the same process is
    not read back from the file.
    """

    def __init__(self, inner: Any, directory: str | Path | None = None, *, model: str | None = None,
                 memory_size: int = 50_000) -> None:
        self.inner = inner
        self.model = model or model_id(inner)
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / DB_NAME
        self._memory: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._memory_size = memory_size
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self.hits = 0
        self.misses = 0

    # The Embedder protocol: name and dim of the wrapped model.
    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def load(self) -> None:
        """Load the wrapped model now, when it can (a warm cache may never need it)."""
        load = getattr(self.inner, "load", None)
        if load is not None:
            load()

    # ------------------------------------------------------------------ storage
    def _db(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():  # a connection never crosses a fork
            self.directory.mkdir(parents=True, exist_ok=True)
            conn = wal_connection(self.path, timeout=60.0)  # workers may open a new file together
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, sha BLOB NOT NULL, "
                         "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, sha)) WITHOUT ROWID")
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _read(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        db = self._db()
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start:start + _CHUNK]
            rows = db.execute(f"SELECT sha, dim, vec FROM vectors WHERE model = ? AND sha IN "
                              f"({','.join('?' * len(chunk))})", (self.model, *chunk)).fetchall()
            for sha, dim, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape == (dim,):
                    found[bytes(sha)] = vec
        return found

    def _write(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("INSERT OR IGNORE INTO vectors (model, sha, dim, vec) VALUES (?, ?, ?, ?)",
                           [(self.model, k, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                            for k, v in items])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _remember(self, key: bytes, vec: np.ndarray) -> None:
        self._memory[key] = vec
        if len(self._memory) > self._memory_size:
            self._memory.popitem(last=False)

    def __len__(self) -> int:
        """Vectors of this model in the file."""
        with self._lock:
            return int(self._db().execute("SELECT COUNT(*) FROM vectors WHERE model = ?",
                                          (self.model,)).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    # ------------------------------------------------------------------ embedding
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 vectors, one row per text: from memory, the file, else the model."""
        keys = [text_key(t) for t in texts]
        with self._lock:
            vecs: dict[bytes, np.ndarray] = {}
            ask: dict[bytes, str] = {}
            for k, t in zip(keys, texts, strict=True):
                if k in vecs or k in ask:
                    continue
                v = self._memory.get(k)
                if v is None:
                    ask[k] = t
                else:
                    self._memory.move_to_end(k)
                    vecs[k] = v
            if ask:
                found = self._read(list(ask))
                self.hits += len(vecs) + len(found)
                todo = [(k, t) for k, t in ask.items() if k not in found]
                if todo:
                    fresh = np.asarray(self.inner.embed([t for _, t in todo]), dtype=np.float32)
                    new = list(zip((k for k, _ in todo), fresh, strict=True))
                    self._write(new)
                    found.update(new)
                    self.misses += len(todo)
                for k, v in found.items():
                    self._remember(k, v)
                vecs.update(found)
            else:
                self.hits += len(vecs)
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            for i, k in enumerate(keys):
                out[i] = vecs[k]
            return out
