"""Deterministic units, notes and pieces for the store conformance suite (and its workers).

Keys are the core's real content keys (``flexamem_core.write.units.unit_key``), so an edited
message under the same id gets a new key exactly as in ingestion.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from flexamem_core.model.messages import Message
from flexamem_core.model.schema import MergedRecord, Note, Piece, Unit, merge_key
from flexamem_core.write.units import unit_key

DIM = 16
Triple = tuple[Unit, Note, list[Piece]]


def vector(seed: str, dim: int = DIM) -> np.ndarray:
    """A unit-norm float32 vector fixed by ``seed``."""
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "little"))
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def make_unit(tag: str, step: int, parent: str | None, *, text: str | None = None,
              links: Sequence[str] = (), n_pieces: int = 3, piece_chars: int = 40,
              msg_id: str | None = None, piece_vectors: Sequence[bool] | bool = False) -> Triple:
    """One agent unit (a command and its output), its note and ``n_pieces`` pieces.

    ``piece_vectors``: which pieces carry their own vector (all, none, or one flag each)."""
    body = text if text is not None else f"output of step {step} in {tag}"
    lines = [f"{body} line {j} " + "x" * piece_chars for j in range(n_pieces)]
    messages = (
        Message(role="assistant", content=f"run command {step} for {tag}", id=msg_id or f"{tag}-a{step}"),
        Message(role="user", content="\n".join(lines), id=f"{tag}-o{step}"),
    )
    key = unit_key(messages, "agent", parent)
    raw = "\n".join(m.text for m in messages)
    unit = Unit(key=key, kind="agent", messages=messages, raw=raw, tokens=len(raw.split()),
                parent=parent, first_step=step)
    note = Note(unit_key=key, record=f"step {step}: {body[:60]}", record_tokens=8,
                keywords=(tag, f"step{step}"), tags=("agent",), description=f"{tag} step {step}",
                embedding=vector(key), links=tuple(links), raw_tokens=unit.tokens, first_step=step)
    flags = [piece_vectors] * n_pieces if isinstance(piece_vectors, bool) else list(piece_vectors)
    pieces = [Piece(unit_key=key, index=j, text=line, tokens=len(line.split()), block=1,
                    starts_block=j == 0, label=f"step {step}",
                    embedding=vector(f"{key}/piece {j}") if flags[j] else None) for j, line in enumerate(lines)]
    return unit, note, pieces


def make_chain(tag: str, n: int, *, parent: str | None = None, first_step: int = 1,
               texts: dict[int, str] | None = None, n_pieces: int = 3, piece_chars: int = 40,
               piece_vectors: Sequence[bool] | bool = False) -> list[Triple]:
    """``n`` chained units; each note links to up to 3 earlier units of the chain."""
    out: list[Triple] = []
    for i in range(n):
        links = [t[0].key for t in out[-3:]][::-1]
        triple = make_unit(tag, first_step + i, out[-1][0].key if out else parent,
                           text=(texts or {}).get(i), links=links, n_pieces=n_pieces,
                           piece_chars=piece_chars, piece_vectors=piece_vectors)
        out.append(triple)
    return out


def make_merged(covers: Sequence[str], text: str, level: int = 1) -> MergedRecord:
    return MergedRecord(key=merge_key(list(covers), "rule"), covers=tuple(covers), text=text,
                        tokens=len(text.split()), level=level)


def snapshot(store, namespace: str) -> dict:
    """Everything a render could read from a namespace, as comparable plain data."""
    notes = store.notes(namespace)
    return {
        "notes": [n.to_dict() for n in notes],
        "parents": store.parents(namespace),
        "pieces": [p.to_dict() for p in store.iter_pieces(namespace)],
        "units": {n.unit_key: store.get_unit(namespace, n.unit_key).to_dict() for n in notes},
    }
