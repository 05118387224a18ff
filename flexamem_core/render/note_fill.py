"""Note vectors after the call: a long catch-up indexes its notes at once and embeds them
while the host waits for its model.

On the first call over an existing history (a resumed trajectory, a thread loaded from a
checkpoint) nearly all of the call's time is embedding the notes of its units: a thousand
agent messages at 4,000 tokens are about two hundred notes, five seconds of MiniLM on two
cores. Yet a cache-stable agent step ranks nothing by vector unless something asks (a human
turn, ``query=``): the timeline is made of records. So a write of at least
:data:`DEFER_UNITS` units (or any write while such a backlog remains) indexes its notes
with their records, BM25 postings and pieces at once, leaves their vectors and links to
after the call, and stores each unit only once its note is complete: the store never holds
a note without its vector, and a process that stops before then leaves those units to the
next catch-up, which writes them again from the host's history.

The vectors are embedded on the embedder's background thread, one batch per embedding call
as the immediate write would make it (16 units), and finished here in write order: each
note linked to the earlier notes nearest it, stored, and its vector indexed. So the stored
notes are bit for bit those an immediate write stores, whatever the thread's timing. Every
call finishes the batches the thread has embedded (no wait); a read of any vector or link
finishes the rest first (:meth:`~flexamem_core.index.namespace.NamespaceIndex.ready`), and
so does ``ingest``, a write with no render to hurry. Embedders without a background thread
(no :class:`~flexamem_core.model.protocols.BackgroundEmbedder`) write at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..logs import logger
from ..model.protocols import Embedder, RecordWriter, Tokenizer, as_background
from ..write.notes import NoteWriter, PendingNotes

if TYPE_CHECKING:
    from ..config import FlexAMemConfig
    from .state import Namespaces, NamespaceState

#: A write of at least this many units at once (a long catch-up) embeds their notes after the call.
DEFER_UNITS = 32

#: A wait for at least this many notes' vectors is logged.
LOGGED_WAIT = 64


def defers_notes(state: NamespaceState, embedder: Embedder, n_units: int) -> bool:
    """Whether a write of ``n_units`` leaves its notes' vectors to after the call: a long
    catch-up, or any write behind one not yet finished, with an embedder that can work in the
    background."""
    return (n_units >= DEFER_UNITS or bool(state.backlog)) and as_background(embedder) is not None


class NoteFill:
    """Finishes the notes a namespace indexed without their vectors (the module docstring)."""

    def __init__(self, namespaces: Namespaces, tokenizer: Tokenizer, embedder: Callable[[], Embedder],
                 writer: RecordWriter) -> None:
        self.namespaces, self.tokenizer, self.embedder, self.writer = namespaces, tokenizer, embedder, writer

    def attach(self, state: NamespaceState, namespace: str, cfg: FlexAMemConfig) -> None:
        """Let a read of the index's vectors finish the backlog first."""
        state.index.fill_pending = lambda: self.fill(state, namespace, cfg, wait=True)

    def queue(self, state: NamespaceState) -> list[Callable[[], list[str]]]:
        """The batches not yet handed to the background thread, as its inputs (one embedding
        call each), and mark them handed."""
        fresh = state.backlog[state.backlog_queued:]
        state.backlog_queued = len(state.backlog)
        return [(lambda texts=batch.texts: texts) for batch in fresh]

    def fill(self, state: NamespaceState, namespace: str, cfg: FlexAMemConfig, wait: bool) -> int:
        """Finish the backlog's batches in order: all of them (``wait``: embedding what the
        thread has not), else those whose vectors are ready. Returns the units finished."""
        if not state.backlog:
            return 0
        embedder = self.embedder()
        left = sum(len(b.units) for b in state.backlog)
        if wait and left >= LOGGED_WAIT:
            logger.info("namespace %s: making the vectors of %d notes written by an earlier call", namespace, left)
        writer = NoteWriter(cfg, self.tokenizer, embedder, self.writer)
        done = 0
        while state.backlog:
            batch = state.backlog[0]
            background = as_background(embedder)
            vectors = embedder.embed(batch.texts) if wait else \
                background.cached(batch.texts) if background is not None else None
            if vectors is None:
                break
            self._finish(writer, state, batch, vectors)
            state.backlog.pop(0)
            state.backlog_queued = max(0, state.backlog_queued - 1)
            done += len(batch.units)
        if done:
            state.version = self.namespaces.version(namespace)  # our own writes
            if state.index.save_due():
                self.namespaces.save_index(state.index)
        return done

    def _finish(self, writer: NoteWriter, state: NamespaceState, batch: PendingNotes, vectors: np.ndarray) -> None:
        store, index = self.namespaces.store, state.index
        for unit, note, pieces, vec in zip(batch.units, batch.notes, batch.pieces, vectors):
            note = dataclasses.replace(note, embedding=np.array(vec, dtype=np.float32))
            writer.finish(store, index, unit, note, pieces)
