"""How every persistent backend turns units, notes, pieces and merges into storable values.

One place for the encoding so SQLite, PostgreSQL and Chroma store exactly the same thing:
JSON text for the data (with lone surrogates escaped so any UTF-8 column accepts it, and
NUL always escaped by ``json``), and embeddings as raw little-endian float32 bytes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from ..model.schema import MergedRecord, Note, Piece, Unit

_F32 = np.dtype("<f4")


#: Marks a string or mapping that held lone surrogates (see :func:`dumps`).
_STR32 = "$flexamem_str32"
_MAP16 = "$flexamem_map16"
_TAGS = (_STR32, _MAP16)
_TAGS_BYTES = (_STR32.encode(), _MAP16.encode())


def dumps(value: Any) -> str:
    """JSON text that encodes to UTF-8 and reads back exactly, whatever the input.

    Plain JSON is used when it can be stored as UTF-8. A string with lone surrogates
    cannot, and ``\\uXXXX`` escapes would not round-trip either (two adjacent lone
    surrogates read back as one astral character), so such strings are written as
    ``{"$flexamem_str32": <UTF-32 code points in hex>}`` (and a mapping with such keys, or
    with a key that looks like a marker, as ``{"$flexamem_map16": [[key, value], ...]}``).
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if _encodable(text) and _STR32 not in text and _MAP16 not in text:  # marker-like text is tagged too
        return text
    return json.dumps(_tagged(value), ensure_ascii=False, separators=(",", ":"))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _tagged(value: Any) -> Any:
    if isinstance(value, str):
        return value if _encodable(value) else {_STR32: value.encode("utf-32-le", "surrogatepass").hex()}
    if isinstance(value, Mapping):
        if all(isinstance(k, str) and _encodable(k) and k not in (_STR32, _MAP16) for k in value):
            return {k: _tagged(v) for k, v in value.items()}
        return {_MAP16: [[_tagged(k), _tagged(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [_tagged(v) for v in value]
    return value


def _untag(d: dict[str, Any]) -> Any:
    if len(d) == 1:
        if _STR32 in d:
            return bytes.fromhex(d[_STR32]).decode("utf-32-le", "surrogatepass")
        if _MAP16 in d:
            return {k: v for k, v in d[_MAP16]}
    return d


def storable(value: Any) -> tuple[Any, bool]:
    """``value`` in a form any UTF-8 JSON store keeps exactly (a store that serialises values
    itself, such as a LangGraph BaseStore), and whether it had to be tagged (see :func:`dumps`)."""
    text = json.dumps(value, ensure_ascii=False)
    if _encodable(text) and _STR32 not in text and _MAP16 not in text:
        return value, False
    return _tagged(value), True


def restored(value: Any) -> Any:
    """The value :func:`storable` tagged, as it was."""
    if isinstance(value, dict):
        return _untag({k: restored(v) for k, v in value.items()})
    if isinstance(value, list):
        return [restored(v) for v in value]
    return value


def loads(text: str | bytes) -> Any:
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if _STR32 in text or _MAP16 in text:
        return json.loads(text, object_hook=_untag)
    return json.loads(text)


def embedding_bytes(embedding: np.ndarray) -> bytes:
    """A 1-d float32 vector as raw bytes (4 bytes per dimension)."""
    arr = np.asarray(embedding, dtype=_F32)
    if arr.ndim != 1:
        raise ValueError(f"a note embedding must be 1-d, got shape {arr.shape}")
    return arr.tobytes()


def embedding_from_bytes(data: bytes | memoryview) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype=_F32).astype(np.float32)


def unit_text(unit: Unit) -> str:
    return dumps(unit.to_dict())


def unit_from_text(text: str) -> Unit:
    return Unit.from_dict(loads(text))


def note_text(note: Note) -> str:
    """The note without its embedding and links (stored in their own columns / rows)."""
    d = note.to_dict(embedding=False)
    del d["links"]
    return dumps(d)


def notes_blob(notes: Sequence[Note]) -> bytes:
    """Many notes without their embeddings (links kept) as one UTF-8 JSON array, for an index
    snapshot: a reopen reads it as one value instead of a row per note."""
    fields = [n.to_dict(embedding=False) for n in notes]
    try:
        return orjson.dumps(fields)  # faster than json; refuses a lone surrogate
    except TypeError:
        return dumps(fields).encode("utf-8")


def notes_from_blob(data: bytes, vectors: Sequence[np.ndarray]) -> list[Note]:
    """The notes of :func:`notes_blob`, given their embeddings in the same order."""
    fields = _own_fields(data)
    if not isinstance(fields, list) or len(fields) != len(vectors):
        raise ValueError("the notes and their vectors do not match")
    for d, v in zip(fields, vectors):
        d["embedding"] = v  # fresh dicts: no copy of each
    return [Note.from_saved(d) for d in fields]


def note_from_parts(text: str, embedding: bytes | memoryview | np.ndarray,
                    links: Iterable[str]) -> Note:
    d: dict[str, Any] = _own_fields(text)
    d["links"] = list(links)
    d["embedding"] = embedding if isinstance(embedding, np.ndarray) else embedding_from_bytes(embedding)
    return Note.from_dict(d)


def _own_fields(text: str | bytes) -> Any:
    """:func:`loads` for a note's or merged record's text, with orjson where it reads the
    same: a reopen decodes every note and merged record of a namespace, and orjson parses
    them faster than json. orjson reads an integer beyond 64 bits as a float, so it is only for
    these records of our own, whose numbers are token and step counts, never for units
    (a host's metadata can hold any integer); what it refuses (a tagged string, NaN) goes
    to :func:`loads`."""
    tagged = _TAGS_BYTES if isinstance(text, bytes) else _TAGS
    if tagged[0] not in text and tagged[1] not in text:  # orjson reads UTF-8 bytes as they are
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return loads(text)


def notes_from_rows(rows: Sequence[tuple[str, str | bytes, bytes | memoryview]],
                    link_rows: Iterable[tuple[str, str]]) -> list[Note]:
    """Notes from ``(key, note_text, embedding_bytes)`` rows and ``(src, dst)`` link rows.

    The embeddings of one dimension are decoded as rows of one read-only matrix (one
    ``frombuffer`` for the whole namespace instead of two copies per note): a reopen
    reads every note of the namespace.
    """
    links = group_links(link_rows)
    blobs = [bytes(emb) for _, _, emb in rows]
    width = len(blobs[0]) if blobs else 0
    if width and width % 4 == 0 and all(len(b) == width for b in blobs):
        vectors: Sequence[np.ndarray] = np.frombuffer(b"".join(blobs), dtype=_F32).reshape(len(blobs), -1)
    else:
        vectors = [embedding_from_bytes(b) for b in blobs]
    return [note_from_parts(data, vec, links.get(key, ()))
            for (key, data, _), vec in zip(rows, vectors, strict=True)]


def piece_text(piece: Piece) -> str:
    """The piece without its vector (a store keeps that in its own binary column)."""
    d = piece.to_dict()
    d.pop("vector", None)
    return dumps(d)


def piece_vector_bytes(piece: Piece) -> bytes | None:
    """The piece's own vector as raw float32 bytes, or None if it has none."""
    return None if piece.embedding is None else embedding_bytes(piece.embedding)


def piece_from_text(text: str, vector: bytes | memoryview | None = None) -> Piece:
    """A piece from :func:`piece_text` and, if stored, :func:`piece_vector_bytes`."""
    piece = Piece.from_dict(loads(text))
    if vector is None:
        return piece
    return dataclasses.replace(piece, embedding=embedding_from_bytes(vector))


def fill_vectors(vectors: Mapping[int, Any]) -> dict[int, np.ndarray]:
    """The vectors given to ``put_piece_vectors``, by piece index, as finite float32 rows
    (a clear error before anything is written)."""
    out: dict[int, np.ndarray] = {}
    for index, vector in vectors.items():
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise TypeError(f"piece index must be an int, not {type(index).__name__}")
        row = np.asarray(vector, dtype=np.float32).reshape(-1)
        if not row.size or not np.isfinite(row).all():
            raise ValueError(f"the vector of piece {index} is empty or not finite")
        out[int(index)] = row
    return out


def merged_text(merged: MergedRecord) -> str:
    return dumps(merged.to_dict())


def merged_from_text(text: str) -> MergedRecord:
    return MergedRecord.from_dict(_own_fields(text))


def check_write(unit: Unit, note: Note, pieces: Iterable[Piece]) -> list[Piece]:
    """Reject a write whose note or pieces belong to another unit (a clear error, early)."""
    if note.unit_key != unit.key:
        raise ValueError(f"note is for unit {note.unit_key!r}, not {unit.key!r}")
    plist = list(pieces)
    for p in plist:
        if p.unit_key != unit.key:
            raise ValueError(f"piece {p.index} is for unit {p.unit_key!r}, not {unit.key!r}")
    if len({p.index for p in plist}) != len(plist):
        raise ValueError(f"unit {unit.key!r} has pieces with duplicate indexes")
    return plist


def group_links(rows: Iterable[tuple[str, str]]) -> Mapping[str, list[str]]:
    """(src, dst) rows in link order to src -> [dst, ...]."""
    out: dict[str, list[str]] = {}
    for src, dst in rows:
        out.setdefault(src, []).append(dst)
    return out
