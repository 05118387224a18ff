"""Piece vectors after the call: a catch-up writes its pieces without their own vectors, and
the next call fills them before it renders.

With ``piece_vectors`` (reader histories) every piece gets its own vector. On the first call
over an existing chat history nearly every vector is a piece's (a thousand turns: about a
thousand pieces and a dozen notes), so embedding them is most of that call. A call that writes
:data:`DEFER_UNITS` or more units at once therefore stores their pieces without vectors and
ranks them by their unit's vector, as agent histories always do; the vectors are embedded on
the embedder's background thread while the host waits for its model
(:meth:`~flexamem_core.render.sync.Sync.prefetch`).

Every call first fills what is missing (:meth:`PieceFill.fill`), waiting for that thread if it
has not finished, so every render after the catch-up ranks by the pieces' own vectors whatever
the thread's timing: the fill asks for the same texts in one embedding call, as the thread
did, and reads a vector the thread made from the cache. A process that did not write them (a
second worker, a restart) fills them the same way, reading vectors another process already
stored. A call that writes one unit (every step of a conversation) embeds its pieces with it,
and ``ingest``, a write with no render to hurry, fills before it returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..logs import logger
from ..model.protocols import Embedder, PieceVectorFill, Store
from ..model.schema import Piece

if TYPE_CHECKING:
    from ..config import FlexAMemConfig
    from .state import Namespaces, NamespaceState

#: A call writing at least this many units at once (a catch-up) fills their pieces' vectors after it.
DEFER_UNITS = 2

#: A fill of at least this many pieces is logged (it may wait for the background embedding).
LOGGED_FILL = 64


def defers_pieces(cfg: FlexAMemConfig, store: Store, n_units: int) -> bool:
    """Whether a write of ``n_units`` leaves its pieces' vectors to after the call."""
    return cfg.embeds_pieces and n_units >= DEFER_UNITS and isinstance(store, PieceVectorFill)


class PieceFill:
    """Fills the pieces' vectors a namespace lacks (the module docstring)."""

    def __init__(self, namespaces: Namespaces, embedder: Callable[[], Embedder]) -> None:
        self.namespaces, self.embedder = namespaces, embedder

    @staticmethod
    def pending_texts(state: NamespaceState) -> list[str]:
        """The texts the next fill embeds for the pieces this process left without vectors, in
        its order: what the background thread embeds while the host waits for its model."""
        return [p.text for _, plist in state.unfilled for p in plist]

    def fill(self, state: NamespaceState, namespace: str, cfg: FlexAMemConfig) -> int:
        """Give every stored piece of the namespace its own vector before this call renders;
        returns how many were filled."""
        store = self.namespaces.store
        index = state.index
        if not cfg.embeds_pieces or not isinstance(store, PieceVectorFill):
            state.unfilled = []
            return 0
        missing = index.missing_piece_docs()
        if not len(missing):
            state.unfilled = []
            return 0
        known = dict(state.unfilled)
        docs: list[int] = []
        rows: list[np.ndarray | None] = []
        texts: list[str] = []
        to_store: list[tuple[str, int, int]] = []  # unit, piece index, position in texts
        by_unit: dict[str, dict[int, Piece]] = {}
        for doc in missing.tolist():
            key = index.doc_unit[doc]
            if key not in by_unit:
                by_unit[key] = {p.index: p for p in known.get(key) or store.pieces(namespace, key)}
            piece = by_unit[key].get(index.doc_piece[doc])
            if piece is None:  # forgotten meanwhile
                continue
            docs.append(doc)
            if piece.embedding is not None:  # filled by another process
                rows.append(np.asarray(piece.embedding, dtype=np.float32))
            else:
                to_store.append((key, piece.index, len(texts)))
                rows.append(None)
                texts.append(piece.text)
        if len(texts) >= LOGGED_FILL:
            logger.info("filling the vectors of %d pieces in namespace %r (written by an earlier call)",
                        len(texts), namespace)
        vectors = self.embedder().embed(texts) if texts else np.zeros((0, index.vectors.shape[1]), np.float32)
        at = iter(range(len(texts)))
        filled = np.stack([r if r is not None else vectors[next(at)] for r in rows]) if rows else vectors
        per_unit: dict[str, dict[int, np.ndarray]] = {}
        for key, piece_index, i in to_store:
            per_unit.setdefault(key, {})[piece_index] = vectors[i]
        for key, vecs in per_unit.items():
            store.put_piece_vectors(namespace, key, vecs)
        if docs:
            index.fill_piece_vectors(np.asarray(docs, dtype=np.int64), filled)
            if index.saved_covers:  # the snapshot holds the stand-ins: a reopen would fill again
                self.namespaces.save_index(index)
        state.unfilled = []
        return len(docs)
