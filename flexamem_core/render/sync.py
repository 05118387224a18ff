"""Ingestion: a history matched against the namespace's stored chain, the rest packed into
units, and the complete units written once as notes.

The usual call brings the same message objects as the last one plus new ones: one identity
pass (in C) confirms the whole chain, and only the new messages are packed. A body that is a
view of the namespace's own copy of the history, which only grew since the chain was matched
against it, needs no pass at all. Units stored earlier (by another process, or before a
restart) are matched by their content address, reading a unit's body only when it is used.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from ..config import FlexAMemConfig
from ..index.warm import catch_up
from ..model.history import MessagesView
from ..model.messages import Message, quick_fingerprint
from ..model.protocols import Embedder, RecordWriter, Store, Tokenizer
from ..model.schema import Unit, UnitKind
from ..write.notes import NoteWriter
from ..write.units import (
    DIGEST_FORMAT,
    PackedUnit,
    StoredUnit,
    closes_as_is,
    messages_digest,
    next_step,
    pack_units,
    to_unit,
    unit_key,
)
from ..write.writers import RuleRecordWriter
from .collector import collector_paused, freeze_bulk
from .note_fill import NoteFill, defers_notes
from .piece_fill import PieceFill, defers_pieces
from .state import Namespaces, NamespaceState

Chain = list[tuple[Unit, tuple[Any, ...]]]


@dataclass
class Synced:
    """The chain's units after a sync, the open unit (packed, not stored) and how many were written."""

    units: list[Unit]
    tail: PackedUnit | None
    written: int


class Sync:
    """Brings a namespace's stored chain up to a history (see the module docstring)."""

    def __init__(self, namespaces: Namespaces, tokenizer: Tokenizer, embedder: Callable[[], Embedder],
                 writer: RecordWriter) -> None:
        self.namespaces, self.tokenizer, self.embedder, self.writer = namespaces, tokenizer, embedder, writer
        self.pieces = PieceFill(namespaces, embedder)
        self.notes = NoteFill(namespaces, tokenizer, embedder, writer)

    @property
    def store(self) -> Store:
        return self.namespaces.store

    def sync(self, state: NamespaceState, namespace: str, body: Sequence[Message], cfg: FlexAMemConfig,
             final: bool = False, progress: Any = None, defer: bool = True) -> Synced:
        """Match ``body`` against the stored chain, pack the rest, write the complete units
        (``final``: the open one too; ``defer``: a long catch-up's note vectors may be made
        after the call, :mod:`.note_fill`)."""
        on_history = isinstance(body, MessagesView) and body.over(state.history)
        matched, i = self._match_known(state, body, on_history and state.chain_on_history)
        state.chain_on_history = False
        kept = len(matched)
        i = self._match_stored(state, namespace, body, matched, i, cfg.history)
        new_units, tail = self._pack(body[i:], matched, cfg, final)
        unfilled = state.unfilled if defers_pieces(cfg, self.store, len(new_units)) else None
        embedder = self.embedder()
        deferred = None
        if new_units and defer and defers_notes(state, embedder, len(new_units)):
            deferred = state.backlog
            self.notes.attach(state, namespace, cfg)
        with catch_up(len(new_units), namespace, progress, deferred is not None) as bar:
            written = NoteWriter(cfg, self.tokenizer, embedder, self.writer).write(
                self.store, state.index, new_units, bar, state.prefetched, unfilled, deferred) if new_units else 0
        if written:
            state.version = self.namespaces.version(namespace)  # our own writes (a racing one shows next time)
            if state.index.save_due():
                self.namespaces.save_index(state.index)
        for unit in new_units:
            state.add_child(unit)
            matched.append((unit, tuple(quick_fingerprint(m) for m in unit.messages)))
        state.set_chain(matched, kept, body)
        state.chain_on_history = on_history
        state.closing = (tail, matched[-1][0].key if matched else None) \
            if tail is not None and not final and closes_as_is(tail, cfg.history, cfg.unit_tokens) else None
        return Synced(state.units, tail, written)

    def prefetch(self, state: NamespaceState, cfg: FlexAMemConfig,
                 also: Sequence[Callable[[], Sequence[str]]] = ()) -> None:
        """Start embedding the notes of the open unit the next step closes, on the embedder's
        background thread, so the host's wait for its model pays for them rather than the
        next call (which then finds them cached: the same vectors, see
        :meth:`~flexamem_core.index.embeddings.SentenceTransformerEmbedder.prefetch`).

        Only with the rule writer: its records cost nothing, where an LLM writer's would be
        asked for twice (records are not cached, vectors are). ``also``: other inputs to embed
        after it (the task's query text). Before them all, the vectors of the pieces this call
        left without (:mod:`.piece_fill`), and before those the notes' (:mod:`.note_fill`).
        Embedders without ``prefetch`` embed at the next call, as before."""
        closing, state.closing = state.closing, None
        embedder = self.embedder()
        prefetch = getattr(embedder, "prefetch", None)
        if prefetch is None:
            return
        inputs = list(also)
        if state.unfilled:
            pending = PieceFill.pending_texts(state)
            inputs.insert(0, lambda: pending)
        backlog = self.notes.queue(state)  # the notes' vectors first: later calls finish them in order
        if closing is not None and isinstance(self.writer, RuleRecordWriter):
            packed, parent = closing
            unit = to_unit(packed, cfg.history, parent)
            if unit.key not in state.index.position:
                note_writer = NoteWriter(cfg, self.tokenizer, embedder, self.writer)

                def texts() -> list[str]:
                    made = note_writer.embedding_input([unit])
                    state.prefetched = made  # its records and pieces: the write need not make them again
                    return made.texts
                inputs.insert(0, texts)
        inputs[:0] = backlog
        if inputs:
            prefetch(*inputs)

    @staticmethod
    def _match_known(state: NamespaceState, body: Sequence[Message], known: bool) -> tuple[Chain, int]:
        """The units of the chain the body still starts with, and the messages they hold."""
        flat = state.chain_messages
        if flat and len(body) >= len(flat) and body[len(flat) - 1] is flat[-1] and \
                (known or all(map(operator.is_, body, flat))):
            return list(state.chain), len(flat)  # the same objects as last call: all units still match
        matched: Chain = []
        i = 0
        for unit, fps in state.chain:
            n = len(unit.messages)
            if i + n > len(body):
                break
            fps = fps or tuple(map(quick_fingerprint, unit.messages))
            if all(a is b or quick_fingerprint(a) == fp for a, b, fp in zip(body[i:i + n], unit.messages, fps)):
                matched.append((unit, fps))
                i += n
            else:
                break
        return matched, i

    def _match_stored(self, state: NamespaceState, namespace: str, body: Sequence[Message], matched: Chain,
                      i: int, kind: UnitKind) -> int:
        """Extend ``matched`` with stored units the body continues with; returns the messages matched.

        A reopened chain of 10,000 units is matched with the collector paused, as the
        namespace was loaded, and frozen after."""
        kept = len(matched)
        parent = matched[-1][0].key if matched else None
        with collector_paused() if not kept and state.index.notes else nullcontext():
            while True:
                found = None
                for key in reversed(state.children.get(parent, [])):
                    found = self._stored_match(state, namespace, key, body, i, kind, parent)
                    if found is not None:
                        break
                if found is None:
                    break
                matched.append((found, ()))  # fingerprints made when first needed: most chains match by identity
                i += len(found.messages)
                parent = found.key
            if not kept:
                freeze_bulk(len(matched))
        return i

    def _stored_match(self, state: NamespaceState, namespace: str, key: str, body: Sequence[Message],
                      i: int, kind: UnitKind, parent: str | None) -> Unit | None:
        """The stored unit ``key`` if the body continues with it at ``i``, else None.

        The key is the content address of the messages, kind and parent, so hashing the
        caller's messages checks them all; the note says how many messages to hash, and
        the unit's own body is read from the store only when it is used."""
        note = state.index.note(key) if key in state.index.position else None
        if note is not None and note.messages:
            n = note.messages
            if i + n > len(body):
                return None
            if note.digest.startswith(DIGEST_FORMAT):  # key is a child of parent: the digest checks the rest
                if messages_digest(body[i:i + n], kind) != note.digest:
                    return None
            elif unit_key(body[i:i + n], kind, parent) != key:
                return None
            return StoredUnit.lazy(self.store, namespace, key, kind, tuple(body[i:i + n]), parent,
                                   note.first_step)
        stored = self.store.get_unit(namespace, key)
        n = len(stored.messages)
        if i + n <= len(body) and stored.kind == kind and unit_key(body[i:i + n], kind, parent) == key:
            return stored
        return None

    def _pack(self, rest: Sequence[Message], matched: Chain, cfg: FlexAMemConfig,
              final: bool) -> tuple[list[Unit], PackedUnit | None]:
        """The messages after the matched chain packed into units: the closed ones, and the open one."""
        kind = cfg.history
        parent = matched[-1][0].key if matched else None
        first_step = next_step(matched[-1][0]) if matched else 1
        packed = pack_units(rest, kind, self.tokenizer, cfg.unit_tokens, first_step=first_step, final=final)
        new_units: list[Unit] = []
        tail = None
        for p in packed:
            if not p.closed:
                tail = p
                break
            unit = to_unit(p, kind, parent)
            new_units.append(unit)
            parent = unit.key
        return new_units, tail

    def stored_chain(self, state: NamespaceState, namespace: str) -> list[Unit]:
        """The namespace's newest stored chain of units (a question over a stored history)."""
        return [self.store.get_unit(namespace, k) for k in state.stored_chain_keys()]
