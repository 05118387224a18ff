"""What the store holds: units, their write-once notes and pieces, and memoised merges.

All are frozen dataclasses with JSON round-trips so that every backend (in-memory,
SQLite, PostgreSQL, Chroma, LangGraph BaseStore) stores exactly the same thing.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np

from .messages import Message

UnitKind = Literal["agent", "reader"]


@dataclass(frozen=True)
class Unit:
    """A unit of history: consecutive agent steps, or a span of one conversation session.

    ``key`` is a content hash of the unit's messages and its parent, so the same unit
    written twice is recognised; ``parent`` is the key of the unit before it in its
    chain (``None`` for the first), which lets an edited history fork a new chain while
    the old units stay stored.
    """

    key: str
    kind: UnitKind
    messages: tuple[Message, ...]
    raw: str
    tokens: int
    parent: str | None
    first_step: int = 0
    session: str | None = None

    @property
    def message_ids(self) -> tuple[str | None, ...]:
        return tuple(m.id for m in self.messages)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "kind": self.kind, "raw": self.raw, "tokens": self.tokens,
            "parent": self.parent, "first_step": self.first_step, "session": self.session,
            "messages": [m.to_dict() for m in self.messages],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Unit:
        return cls(key=d["key"], kind=d["kind"], raw=d["raw"], tokens=int(d["tokens"]),
                   parent=d.get("parent"), first_step=int(d.get("first_step", 0)),
                   session=d.get("session"),
                   messages=tuple(Message.from_dict(m) for m in d["messages"]))


@dataclass(frozen=True)
class Piece:
    """A verbatim slice of a unit's raw text, cut at line breaks, inside one turn or block.

    ``embedding`` is the piece's own vector (``phi(text)``, computed once when its unit is
    written, in the unit's batch), or None for a piece written without one
    (``piece_vectors=False``, or a store that keeps none): the index then uses its unit's
    note vector instead.
    """

    unit_key: str
    index: int
    text: str
    tokens: int
    block: int
    starts_block: bool
    label: str
    embedding: np.ndarray | None = field(default=None, compare=False, hash=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; the vector, if any, as base64 of little-endian float32 (``vector``)."""
        d: dict[str, Any] = {"unit_key": self.unit_key, "index": self.index, "text": self.text,
                             "tokens": self.tokens, "block": self.block, "starts_block": self.starts_block,
                             "label": self.label}
        if self.embedding is not None:
            d["vector"] = vector_b64(self.embedding)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Piece:
        vec = d.get("vector")
        return cls(unit_key=d["unit_key"], index=int(d["index"]), text=d["text"],
                   tokens=int(d["tokens"]), block=int(d["block"]),
                   starts_block=bool(d["starts_block"]), label=d["label"],
                   embedding=vector_from_b64(vec) if vec is not None else None)


_F32 = np.dtype("<f4")


def vector_b64(vec: np.ndarray) -> str:
    """A 1-d float32 vector as base64 text (exact, a third the size of a JSON float list)."""
    arr = np.asarray(vec, dtype=_F32)
    if arr.ndim != 1:
        raise ValueError(f"a vector must be 1-d, got shape {arr.shape}")
    return base64.b64encode(arr.tobytes()).decode("ascii")


def vector_from_b64(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=_F32).astype(np.float32)


@dataclass(frozen=True)
class Note:
    """The write-once note of a unit: record, fields, embedding and links (no raw text).

    Rendering reads notes only; raw text and pieces are fetched for the few units that
    are recovered, so a render never loads the whole history.
    """

    unit_key: str
    record: str
    record_tokens: int
    keywords: tuple[str, ...]
    tags: tuple[str, ...]
    description: str
    embedding: np.ndarray = field(compare=False, hash=False, repr=False)
    links: tuple[str, ...]
    raw_tokens: int
    first_step: int = 0
    last_step: int = 0
    label: str = ""
    writer: str = "rule"
    llm_calls: int = 0
    #: Messages in the unit, so a reopened chain is matched without decoding unit bodies
    #: (0 in a note without this field: the unit is read instead).
    messages: int = 0
    #: ``units.messages_digest`` of the unit's messages ("" in a note without it: the key is checked).
    digest: str = ""
    #: The name of the tokenizer that counted ``record_tokens`` and ``raw_tokens`` ("" where
    #: unknown): a render takes a count as exact only from the tokenizer it counts with.
    counted_by: str = ""
    #: An agent unit's identifiers as ``(text, outputs, assistant messages)`` that contain it
    #: (:mod:`flexamem_core.write.identifiers`); empty for conversation units and older notes.
    identifiers: tuple[tuple[str, int, int], ...] = ()

    def to_dict(self, embedding: bool = True) -> dict[str, Any]:
        """Its fields as JSON values; ``embedding=False`` leaves the vector out (a store keeps
        it as float32 bytes: writing it as 384 Python floats would cost more than the rest)."""
        d = {"unit_key": self.unit_key, "record": self.record,
             "record_tokens": self.record_tokens, "keywords": list(self.keywords),
             "tags": list(self.tags), "description": self.description,
             "links": list(self.links), "raw_tokens": self.raw_tokens,
             "first_step": self.first_step, "last_step": self.last_step, "label": self.label,
             "writer": self.writer, "llm_calls": self.llm_calls, "messages": self.messages,
             "digest": self.digest, "counted_by": self.counted_by,
             "identifiers": [list(i) for i in self.identifiers]}
        if embedding:
            d["embedding"] = [float(x) for x in np.asarray(self.embedding, dtype=np.float32)]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Note:
        return cls(unit_key=d["unit_key"], record=d["record"],
                   record_tokens=int(d["record_tokens"]), keywords=tuple(d["keywords"]),
                   tags=tuple(d["tags"]), description=d["description"],
                   embedding=np.asarray(d["embedding"], dtype=np.float32),
                   links=tuple(d["links"]), raw_tokens=int(d["raw_tokens"]),
                   first_step=int(d.get("first_step", 0)), last_step=int(d.get("last_step", 0)),
                   label=d.get("label", ""), writer=d.get("writer", "rule"),
                   llm_calls=int(d.get("llm_calls", 0)), messages=int(d.get("messages", 0)),
                   digest=str(d.get("digest", "")), counted_by=str(d.get("counted_by", "")),
                   identifiers=tuple((str(t), int(o), int(n)) for t, o, n in d.get("identifiers", ())))

    @classmethod
    def from_saved(cls, d: dict[str, Any]) -> Note:
        """:meth:`from_dict` for the fields of :meth:`to_dict` as this version writes them, with
        the embedding as a float32 vector (an index snapshot's notes). ``d`` is consumed.

        A reopen makes every note of a namespace, and the frozen dataclass's ``__init__`` sets
        each of its 17 fields through ``object.__setattr__``, which adds up over every note;
        here the instance's dict is filled at once. Fields of another form (the notes of a
        snapshot of another version, a number that is not an int) go through :meth:`from_dict`.
        """
        if d.keys() != _NOTE_FIELDS or not all(type(d[k]) is int for k in _NOTE_INTS) \
                or type(d["embedding"]) is not np.ndarray or d["embedding"].dtype != np.float32:
            return cls.from_dict(d)
        d["keywords"], d["tags"], d["links"] = tuple(d["keywords"]), tuple(d["tags"]), tuple(d["links"])
        d["identifiers"] = tuple(map(tuple, d["identifiers"]))
        note = object.__new__(cls)
        note.__dict__.update(d)
        return note


_NOTE_FIELDS = frozenset(f.name for f in fields(Note))
_NOTE_INTS = ("record_tokens", "raw_tokens", "first_step", "last_step", "llm_calls", "messages")


@dataclass(frozen=True)
class MergedRecord:
    """A memoised merge of consecutive timeline items (derived data, keyed by what it covers)."""

    key: str
    covers: tuple[str, ...]
    text: str
    tokens: int
    level: int
    writer: str = "rule"
    #: Tokens of its timeline line as ``line_counter`` (a tokenizer and line format) counts
    #: them, so a reopened timeline does not tokenize every merged line again (0: unknown).
    line_tokens: int = 0
    line_counter: str = ""

    def line_count(self, counter: str) -> int | None:
        """Its line's token count if ``counter`` made it, else None (count the line again)."""
        return self.line_tokens if self.line_counter == counter and self.line_tokens > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "covers": list(self.covers), "text": self.text,
                "tokens": self.tokens, "level": self.level, "writer": self.writer,
                "line_tokens": self.line_tokens, "line_counter": self.line_counter}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MergedRecord:
        return cls(key=d["key"], covers=tuple(d["covers"]), text=d["text"],
                   tokens=int(d["tokens"]), level=int(d["level"]), writer=d.get("writer", "rule"),
                   line_tokens=int(d.get("line_tokens", 0)), line_counter=str(d.get("line_counter", "")))


def merge_key(covers: Sequence[str], writer: str) -> str:
    """Memo key of a merged record: the units it covers and who wrote it."""
    h = hashlib.sha256(writer.encode())
    for k in covers:
        h.update(b"\x00" + k.encode())
    return h.hexdigest()[:32]
