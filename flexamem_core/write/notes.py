"""Writing a note once per unit: record and fields, embedding, links, pieces.

With ``piece_vectors`` (the default for reader histories) every piece is embedded too, in the same embedding
call as the notes of its batch, and stored with its vector; a render then ranks pieces by
cosine without any model call but the query's. A catch-up leaves its pieces' vectors to after
the call (:mod:`flexamem_core.render.piece_fill`).

``e_i = phi(s_i || f_i)``, for an agent unit from the first :data:`NOTE_HEAD_CHARS`
characters of that text: its record opens with the steps' commands and outcomes, and the rest
(more steps, keywords, the thought) costs far more to embed (the model reads up to 256 word
pieces, and an agent's identifiers split into many) and finds no more evidence
(docs/evaluation.md says where the length was chosen and checked). That cost is
the first call's over a long history and every closed unit's. The links are the
``links_per_note`` earlier notes with the highest cosine to ``e_i`` (both directions are
followed at read time, so an earlier note never has to be rewritten to point forward).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..index.namespace import NamespaceIndex
from ..model.protocols import Embedder, RecordWriter, Store, Tokenizer, WrittenRecord
from ..model.schema import Note, Piece, Unit
from .identifiers import unit_identifiers
from .pieces import cut_pieces
from .units import messages_digest, next_step, unit_blocks, unit_label

if TYPE_CHECKING:
    from ..config import FlexAMemConfig

#: Characters of an agent note's text its vector is embedded from (module docstring).
NOTE_HEAD_CHARS = 200


@dataclass(frozen=True)
class EmbeddingInput:
    """What writing some units embeds, and the records and pieces it was made from."""

    keys: tuple[str, ...]
    records: list[WrittenRecord]
    pieces: list[list[Piece]]
    texts: list[str]


@dataclass
class PendingNotes:
    """Units indexed with their records but not yet their vectors, nor stored: what one batch
    of a deferred write embeds (its note texts, in one embedding call, as an immediate write
    would) and then stores (:mod:`flexamem_core.render.note_fill`)."""

    units: list[Unit]
    notes: list[Note]
    pieces: list[list[Piece]]
    texts: list[str]


class NoteWriter:
    """Turns units into stored notes; batches the embedding of several units."""

    def __init__(self, config: FlexAMemConfig, tokenizer: Tokenizer, embedder: Embedder,
                 writer: RecordWriter) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.embedder = embedder
        self.writer = writer

    def write(self, store: Store, index: NamespaceIndex, units: Sequence[Unit],
              progress: object | None = None, ready: EmbeddingInput | None = None,
              unfilled: list[tuple[str, list[Piece]]] | None = None,
              deferred: list[PendingNotes] | None = None) -> int:
        """Write every unit not yet stored; returns how many were new. Idempotent.

        ``ready``: the :meth:`embedding_input` of one unit made ahead (by a prefetch), used
        when that unit is written alone, as it is on the step that closes it. ``unfilled``:
        the pieces are stored without their own vectors and listed there, unit by unit, to be
        filled after the call (:mod:`flexamem_core.render.piece_fill`). ``deferred``: the
        notes are indexed at once without their vectors and appended there, batch by batch,
        to be embedded, linked and stored after the call (:meth:`finish` then writes them
        exactly as this call would have)."""
        if any(u.key not in index.position and store.has_unit(index.namespace, u.key) for u in units):
            index.load()  # another writer (process) stored some of them: pick its notes up
        todo = [u for u in units if u.key not in index.position]
        new = 0
        for start in range(0, len(todo), 16):
            batch = todo[start:start + 16]
            made = ready if unfilled is None and ready is not None and ready.keys == tuple(u.key for u in batch) \
                else self.embedding_input(batch, with_pieces=unfilled is None and deferred is None)
            if deferred is not None:
                deferred.append(self._defer(index, batch, made, unfilled))
                new += len(batch)
                if progress is not None and hasattr(progress, "update"):
                    progress.update(len(batch))
                continue
            embedded = self.embedder.embed(made.texts)
            at = len(batch)
            for unit, rec, vec, plist in zip(batch, made.records, embedded[:len(batch)], made.pieces):
                pieces: list[Piece] = plist
                if unfilled is not None and self.config.embeds_pieces:
                    unfilled.append((unit.key, plist))
                elif self.config.embeds_pieces:
                    pieces = [dataclasses.replace(p, embedding=np.array(embedded[at + i], dtype=np.float32))
                              for i, p in enumerate(plist)]
                    at += len(plist)
                new += self.finish(store, index, unit, self._note(unit, rec, vec), pieces)
                if progress is not None and hasattr(progress, "update"):
                    progress.update(1)
        return new

    def embedding_input(self, units: Sequence[Unit], with_pieces: bool = True) -> EmbeddingInput:
        """The units' keys and records, their pieces, and the texts one embedding call gets for
        them: the notes, then (``embeds_pieces`` and ``with_pieces``) all their pieces."""
        written = [self.writer.write(u) for u in units]
        texts = [note_text(w, u.kind) for w, u in zip(written, units)]
        cut = [cut_pieces(u.key, unit_blocks(u), self.tokenizer, self.config.tuning.piece_tokens) for u in units]
        if self.config.embeds_pieces and with_pieces:
            texts += [p.text for plist in cut for p in plist]
        return EmbeddingInput(tuple(u.key for u in units), written, cut, texts)

    def _note(self, unit: Unit, rec: WrittenRecord, vec: np.ndarray) -> Note:
        """The unit's note with the vector ``vec`` and, until :meth:`finish` links it, no links."""
        return Note(unit_key=unit.key, record=rec.record,
                    record_tokens=self.tokenizer.count(rec.record), keywords=rec.keywords,
                    tags=rec.tags, description=rec.description, embedding=vec, links=(),
                    raw_tokens=self.tokenizer.count(unit.raw), first_step=unit.first_step,
                    last_step=next_step(unit) - 1, label=unit_label(unit),
                    writer=rec.writer, llm_calls=rec.llm_calls, messages=len(unit.messages),
                    digest=messages_digest(unit.messages, unit.kind), counted_by=self.tokenizer.name,
                    identifiers=unit_identifiers(unit.messages) if unit.kind == "agent" else ())

    def _defer(self, index: NamespaceIndex, batch: Sequence[Unit], made: EmbeddingInput,
               unfilled: list[tuple[str, list[Piece]]] | None) -> PendingNotes:
        """Index the batch's notes without their vectors (pending) and say what finishes them."""
        dim = index.note_dim or self.embedder.dim
        notes = [self._note(u, rec, np.zeros(dim, dtype=np.float32)) for u, rec in zip(batch, made.records)]
        for unit, note, plist in zip(batch, notes, made.pieces):
            if unfilled is not None and self.config.embeds_pieces:
                unfilled.append((unit.key, plist))
            index.add(note, plist, pending=True)
        return PendingNotes(list(batch), notes, list(made.pieces), made.texts[:len(batch)])

    def finish(self, store: Store, index: NamespaceIndex, unit: Unit, note: Note, pieces: Sequence[Piece]) -> int:
        """Link the note to the earlier notes nearest its vector, store the unit and index it (a
        pending note: give it its vector); returns 1 if the store did not hold it yet."""
        pos = index.position.get(unit.key)
        note = dataclasses.replace(note, links=tuple(index.nearest(note.embedding, self.config.tuning.links_per_note,
                                                                   before=pos)))
        new = int(store.write_unit(index.namespace, unit, note, pieces))
        if pos is None:
            index.add(note, pieces)
        else:
            index.set_vector(note)
        return new


def note_text(written: WrittenRecord, kind: str) -> str:
    """The text a note's vector is embedded from: record and fields, an agent note's cut to its
    head (module docstring)."""
    text = f"{written.record}\n" + _fields(written.keywords, written.tags, written.description)
    return text[:NOTE_HEAD_CHARS] if kind == "agent" else text


def _fields(keywords: Sequence[str], tags: Sequence[str], description: str) -> str:
    return f"keywords: {', '.join(keywords)}\ntags: {', '.join(tags)}\ndescription: {description}"
