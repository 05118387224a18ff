"""Chroma store: for users whose vectors already live in Chroma.

Embedded (``chromadb.PersistentClient``) or client-server (``chromadb.HttpClient`` to a
``chroma run`` server). One collection per namespace (named by a hash of the namespace,
which is kept in the collection's metadata), holding four kinds of entries told apart by
the ``kind`` metadata field: ``note`` (the note's embedding, a real vector a Chroma user
can query), ``unit`` (raw text and messages), ``piece`` and ``merged``. Every entry
carries an explicit embedding (units carry their note's vector, pieces their own, or their
note's when written without one, merged records the mean of what they cover): the
collection has no embedding function, so Chroma's default one, which would download a
model, is never triggered. Telemetry is off.

A unit is written with one ``add`` call (unit, note and pieces together). Write order is
a per-entry ``seq`` (a nanosecond clock, strictly increasing within a process), so
appends from one process keep their order; Chroma offers no transactions, so deletion
and the exactly-once check are not atomic across processes (use SQLite or PostgreSQL for
many concurrent writers).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from ..model.schema import MergedRecord, Note, Piece, Unit
from . import codec
from .forgetting import merged_covering
from .names import check_namespace

_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")
_PAGE = 2000
_READ_RETRIES = 6


def _import_chromadb() -> Any:
    try:
        import chromadb
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("ChromaStore needs chromadb: pip install 'flexamem[chroma]'") from exc
    return chromadb


def _get(col: Any, **kwargs: Any) -> Any:
    """``col.get`` retried a few times: a Chroma server can fail a read that races with
    its own index compaction ("Error creating hnsw segment reader"); reads are idempotent."""
    from chromadb.errors import InternalError

    for attempt in range(_READ_RETRIES):
        try:
            return col.get(**kwargs)
        except InternalError:
            if attempt == _READ_RETRIES - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def _parent_meta(parent: str | None) -> str:
    return parent if parent is not None else ""


class ChromaStore:
    """Append-only store on Chroma collections, one per namespace.

    Give a ``path`` for an embedded store, ``host``/``port`` for a Chroma server, or an
    existing ``client``. ``prefix`` starts every collection name (several stores can share
    one server).
    """

    def __init__(self, path: str | None = None, *, host: str | None = None, port: int = 8000,
                 ssl: bool = False, client: Any = None, prefix: str = "flexamem") -> None:
        if not _PREFIX.match(prefix):
            raise ValueError(f"invalid collection prefix {prefix!r}: use 1-63 of [A-Za-z0-9_-]")
        if sum(x is not None for x in (path, host, client)) != 1:
            raise ValueError("give exactly one of path (embedded), host (server) or client")
        self.prefix = prefix
        self._location = ("path", str(Path(path).expanduser().resolve())) if path is not None else \
            ("server", f"{'chroma+https' if ssl else 'chroma+http'}://{host}:{port}") if host is not None else None
        if client is None:
            chromadb = _import_chromadb()
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            if path is not None:
                client = chromadb.PersistentClient(path=str(path), settings=settings)
            else:
                client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
        self.client = client
        self._collections: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._last_seq = 0

    @property
    def url(self) -> str | None:
        """The URL this store reopens under; None for a store built on a client object."""
        if self._location is None:
            return None
        kind, where = self._location
        base = "chroma:///" + quote(where.lstrip("/")) if kind == "path" else where
        return f"{base}?prefix={self.prefix}"

    # -- collections ------------------------------------------------------------------

    def collection_name(self, namespace: str) -> str:
        digest = hashlib.sha256(check_namespace(namespace).encode()).hexdigest()[:40]
        return f"{self.prefix}-{digest}"

    def _collection(self, namespace: str, *, create: bool = False) -> Any:
        """The namespace's collection, or None when it does not exist and ``create`` is False."""
        from chromadb.errors import NotFoundError

        name = self.collection_name(namespace)
        with self._lock:
            col = self._collections.get(namespace)
            if col is not None:
                return col
            if create:
                col = self.client.get_or_create_collection(
                    name, embedding_function=None, metadata={"flexamem_namespace": namespace})
                # default l2 space: for unit-norm vectors it ranks like cosine, and unlike
                # Chroma's cosine space it stores the vectors exactly as given
            else:
                try:
                    col = self.client.get_collection(name, embedding_function=None)
                except (NotFoundError, ValueError):
                    return None
            self._collections[namespace] = col
            return col

    def _next_seq(self) -> int:
        with self._lock:
            self._last_seq = max(time.time_ns(), self._last_seq + 1)
            return self._last_seq

    @staticmethod
    def _get_all(col: Any, where: dict[str, Any], include: list[str]) -> dict[str, list[Any]]:
        """Every entry matching ``where``, fetched in pages."""
        out: dict[str, list[Any]] = {"ids": [], **{k: [] for k in include}}
        offset = 0
        while True:
            page = _get(col, where=where, include=include, limit=_PAGE, offset=offset)
            out["ids"].extend(page["ids"])
            for k in include:
                out[k].extend(page[k] if page[k] is not None else [])
            if len(page["ids"]) < _PAGE:
                return out
            offset += _PAGE

    # -- Store protocol ---------------------------------------------------------------

    def write_unit(self, namespace: str, unit: Unit, note: Note, pieces: Sequence[Piece]) -> bool:
        check_namespace(namespace)
        plist = codec.check_write(unit, note, pieces)
        vec = np.asarray(note.embedding, dtype=np.float32)
        col = self._collection(namespace, create=True)
        if _get(col, ids=[f"u:{unit.key}"], include=[])["ids"]:
            return False
        seq = self._next_seq()
        ids = [f"u:{unit.key}", f"n:{unit.key}"] + [f"p:{unit.key}:{p.index}" for p in plist]
        docs = [codec.unit_text(unit), codec.note_text(note)] + [codec.piece_text(p) for p in plist]
        metas: list[dict[str, Any]] = [
            {"kind": "unit", "seq": seq, "parent": _parent_meta(unit.parent), "npieces": len(plist),
             "pieces": codec.dumps([p.index for p in plist])},
            {"kind": "note", "seq": seq, "links": codec.dumps(list(note.links))},
        ] + [{"kind": "piece", "seq": seq, "unit": unit.key, "idx": p.index, "own_vector": p.embedding is not None}
             for p in plist]
        if len(ids) > self.client.get_max_batch_size():
            raise ValueError(f"unit {unit.key!r} has too many pieces ({len(plist)}) for one Chroma batch")
        vectors = np.repeat(vec[None, :], len(ids), axis=0)
        for row, p in enumerate(plist, start=2):  # a piece with its own vector is stored under it
            if p.embedding is not None:
                vectors[row] = _piece_vector(p, vec.shape[0])
        col.add(ids=ids, embeddings=vectors, documents=docs,
                metadatas=metas)  # one call: the unit, its note and pieces together
        return True

    def put_piece_vectors(self, namespace: str, unit_key: str, vectors: Mapping[int, np.ndarray]) -> None:
        """Fill the own vectors of a unit's pieces that have none (``PieceVectorFill``): each
        such piece entry gets the vector, and its ``own_vector`` mark, in one ``update``."""
        rows = codec.fill_vectors(vectors)
        col = self._collection(namespace)
        if col is None or not rows:
            return
        got = _get(col, ids=[f"p:{unit_key}:{i}" for i in rows], include=["metadatas"])
        todo = [(i, m) for i, m in zip(got["ids"], got["metadatas"], strict=True) if not m.get("own_vector")]
        if todo:
            col.update(ids=[i for i, _ in todo], embeddings=np.stack([rows[int(m["idx"])] for _, m in todo]),
                       metadatas=[{**m, "own_vector": True} for _, m in todo])

    def has_unit(self, namespace: str, key: str) -> bool:
        col = self._collection(namespace)
        return bool(col is not None and _get(col, ids=[f"u:{key}"], include=[])["ids"])

    def get_unit(self, namespace: str, key: str) -> Unit:
        col = self._collection(namespace)
        got = _get(col, ids=[f"u:{key}"], include=["documents"]) if col is not None else {"ids": []}
        if not got["ids"]:
            raise KeyError(f"no unit {key!r} in namespace {namespace!r}")
        return codec.unit_from_text(got["documents"][0])

    def notes(self, namespace: str) -> list[Note]:
        col = self._collection(namespace)
        if col is None:
            return []
        got = self._get_all(col, {"kind": "note"}, ["documents", "metadatas", "embeddings"])
        rows = sorted(zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True),
                      key=lambda r: (r[2]["seq"], r[0]))
        return [codec.note_from_parts(doc, np.asarray(emb, dtype=np.float32), codec.loads(meta["links"]))
                for _, doc, meta, emb in rows]

    def parents(self, namespace: str) -> dict[str, str | None]:
        col = self._collection(namespace)
        if col is None:
            return {}
        got = self._get_all(col, {"kind": "unit"}, ["metadatas"])
        rows = sorted(zip(got["ids"], got["metadatas"], strict=True), key=lambda r: (r[1]["seq"], r[0]))
        return {i[2:]: (m["parent"] or None) for i, m in rows}

    def pieces(self, namespace: str, unit_key: str) -> list[Piece]:
        col = self._collection(namespace)
        if col is None:
            return []
        unit = _get(col, ids=[f"u:{unit_key}"], include=["metadatas"])
        if not unit["ids"]:
            return []
        ids = [f"p:{unit_key}:{i}" for i in codec.loads(unit["metadatas"][0]["pieces"])]
        if not ids:
            return []
        got = _get(col, ids=ids, include=["documents", "metadatas", "embeddings"])
        return sorted((_piece(d, m, e) for d, m, e in zip(got["documents"], got["metadatas"], got["embeddings"],
                                                          strict=True)), key=lambda p: p.index)

    def iter_pieces(self, namespace: str) -> Iterable[Piece]:
        col = self._collection(namespace)
        if col is None:
            return []
        got = self._get_all(col, {"kind": "piece"}, ["documents", "metadatas", "embeddings"])
        rows = sorted(zip(got["metadatas"], got["documents"], got["embeddings"], strict=True),
                      key=lambda r: (r[0]["seq"], r[0]["unit"], r[0]["idx"]))
        return [_piece(doc, meta, emb) for meta, doc, emb in rows]

    def get_merged(self, namespace: str, key: str) -> MergedRecord | None:
        col = self._collection(namespace)
        if col is None:
            return None
        got = _get(col, ids=[f"m:{key}"], include=["documents"])
        return codec.merged_from_text(got["documents"][0]) if got["ids"] else None

    def put_merged(self, namespace: str, merged: MergedRecord) -> None:
        col = self._collection(namespace)
        if col is None or not merged.covers:
            return
        covers = sorted(set(merged.covers))
        got = _get(col, ids=[f"n:{c}" for c in covers] + [f"m:{c}" for c in covers], include=["embeddings"])
        if {i[2:] for i in got["ids"]} != set(covers):
            return  # something it covers was deleted meanwhile: never store its text
        mean = np.asarray(got["embeddings"], dtype=np.float32).mean(axis=0)
        mean /= max(float(np.linalg.norm(mean)), 1e-12)
        col.add(ids=[f"m:{merged.key}"], embeddings=mean[None, :], documents=[codec.merged_text(merged)],
                metadatas=[{"kind": "merged", "seq": self._next_seq(), "covers": codec.dumps(covers)}])

    def namespaces(self) -> list[str]:
        found: list[tuple[int, str]] = []
        for col in self.client.list_collections():
            meta = col.metadata or {}
            ns = meta.get("flexamem_namespace")
            if not ns or col.name != self.collection_name(ns):
                continue
            first = _get(col, where={"kind": "unit"}, include=[], limit=1)
            if first["ids"]:
                found.append((len(found), ns))
        return [ns for _, ns in found]

    # -- forgetting -------------------------------------------------------------------

    def delete_unit(self, namespace: str, key: str) -> bool:
        """Forget a unit: note, pieces, embedding, links to it, merged records covering it."""
        col = self._collection(namespace)
        if col is None:
            return False
        with self._lock:
            unit = _get(col, ids=[f"u:{key}"], include=["metadatas"])
            if not unit["ids"]:
                return False
            piece_ids = [f"p:{key}:{i}" for i in codec.loads(unit["metadatas"][0]["pieces"])]
            col.delete(ids=[f"u:{key}", f"n:{key}", *piece_ids])
            col.delete(where={"$and": [{"kind": "piece"}, {"unit": key}]})  # belt and braces
            notes = self._get_all(col, {"kind": "note"}, ["metadatas"])
            for nid, meta in zip(notes["ids"], notes["metadatas"], strict=True):
                links = codec.loads(meta["links"])
                if key in links:
                    col.update(ids=[nid], metadatas=[{**meta, "links": codec.dumps([x for x in links
                                                                                     if x != key])}])
            merged = self._get_all(col, {"kind": "merged"}, ["metadatas"])
            covers = {mid[2:]: codec.loads(m["covers"]) for mid, m in
                      zip(merged["ids"], merged["metadatas"], strict=True)}
            dropped = merged_covering(covers, [key])
            if dropped:
                col.delete(ids=[f"m:{m}" for m in dropped])
            return True

    def delete_namespace(self, namespace: str) -> int:
        """Forget a whole namespace: its collection is deleted."""
        col = self._collection(namespace)
        if col is None:
            return 0
        with self._lock:
            count = len(self._get_all(col, {"kind": "unit"}, [])["ids"])
            self.client.delete_collection(self.collection_name(namespace))
            self._collections.pop(namespace, None)
            return count

    def close(self) -> None:
        """Drop cached collection handles (the Chroma client needs no closing)."""
        with self._lock:
            self._collections.clear()


def _piece_vector(piece: Piece, dim: int) -> np.ndarray:
    own = np.asarray(piece.embedding, dtype=np.float32).reshape(-1)
    if own.shape[0] != dim:
        raise ValueError(f"piece {piece.index} of unit {piece.unit_key!r} has a vector of dimension "
                         f"{own.shape[0]}, its note {dim}")
    return own


def _piece(doc: str, meta: dict[str, Any], embedding: Any) -> Piece:
    """A stored piece; its entry's vector is its own where ``own_vector`` says so (else the note's)."""
    piece = codec.piece_from_text(doc)
    if meta.get("own_vector"):
        return dataclasses.replace(piece, embedding=np.asarray(embedding, dtype=np.float32))
    return piece
