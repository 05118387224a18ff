"""Unit recovery: each candidate, in rank order, at the highest resolution that fits the room
left (raw text, an excerpt of its best pieces, or its record: fit-or-degrade), then the
memory shrunk to the allowance."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..index.namespace import NamespaceIndex
from ..model.protocols import Tokenizer
from ..model.schema import Note
from .assembly import Assembler, Element, MemoryRender, shrink, stored_raw_tokens
from .candidates import Candidate
from .joins import joined_estimate, verbatim_join
from .report import timeline_runs, unit_rows
from .timeline import Timeline

if TYPE_CHECKING:
    from ..config import FlexAMemConfig


def best_pieces(docs: range, scores: np.ndarray, index: NamespaceIndex, limit: int) -> list[int]:
    """Docs of one unit with the best positive scores, greedily within ``limit`` tokens."""
    if len(docs) == 0:
        return []
    local = scores[docs.start:docs.stop]
    hits = np.flatnonzero(local > 0)
    order = hits[np.lexsort((hits, -local[hits]))]
    chosen, used = [], 0
    tokens = index.doc_tokens_array()
    for i in order:
        t = int(tokens[docs.start + i])
        if used + t <= limit:
            chosen.append(docs.start + int(i))
            used += t
    return sorted(chosen)


def fit_or_degrade(notes: Sequence[Note], cands: Sequence[Candidate], room: int, index: NamespaceIndex,
                   cfg: FlexAMemConfig, tokenizer: Tokenizer, excerpt_scores: np.ndarray,
                   credit_of: Callable[[int], int | None], excerpts: bool = True,
                   excerpt_tokens: int | None = None) -> list[Element]:
    """Each candidate, in rank order, at the highest resolution that fits the room left:
    raw text, else an excerpt of its BM25-best pieces, else nothing (it stays a record).

    ``credit_of(pos)`` is None for a unit not shown this call, else the tokens of the
    record its text replaces in place (0: the text is shown next to the record).
    ``excerpts=False``: raw text or nothing; ``excerpt_tokens``: the excerpt size (default ``E``).
    """
    store, ns = index.store, index.namespace
    elements: list[Element] = []
    for rank, cand in enumerate(cands):
        credit = credit_of(cand.pos)
        if credit is None:
            continue
        in_place = credit > 0
        note = notes[cand.pos]
        header = f"- [{note.label}] (raw)"
        raw_cost = tokenizer.count(header) + 1 + note.raw_tokens + 1 - credit
        if raw_cost <= room:
            raw = store.get_unit(ns, note.unit_key).raw
            parts = ((f"{header}\n", None), (raw, stored_raw_tokens(note, tokenizer)))
            elements.append(Element(cand.pos, rank, "raw", f"{header}\n{raw}", raw_cost + credit, in_place, parts))
            room -= raw_cost
            continue
        if not excerpts:
            continue
        docs = index.unit_docs.get(note.unit_key, range(0))
        chosen = best_pieces(docs, excerpt_scores, index, cfg.tuning.excerpt_tokens if excerpt_tokens is None
                             else excerpt_tokens)
        if not chosen:
            continue
        plist = store.pieces(ns, note.unit_key)
        kept = [plist[index.doc_piece[d]] for d in chosen]
        head = f"- [{note.label}] {note.record}\n(excerpt)"
        # Estimated from stored piece counts (no re-tokenizing); the caller checks exactly.
        exc_cost = tokenizer.count(head) + 1 + joined_estimate(kept, len(plist), tokenizer) + 1 - credit
        if exc_cost <= room:
            joined = verbatim_join(kept, plist, lambda k=note.unit_key: store.get_unit(ns, k).raw)
            exc_text = f"{head}\n{joined}"
            elements.append(Element(cand.pos, rank, "excerpt", exc_text, exc_cost + credit, in_place))
            room -= exc_cost
    return elements


def unit_recovery(notes: Sequence[Note], timeline: Timeline, cands: Sequence[Candidate], room: int,
                  allowance: int, index: NamespaceIndex, cfg: FlexAMemConfig, tokenizer: Tokenizer,
                  excerpt_scores: np.ndarray, in_place_detail: bool = True, excerpts: bool = True) -> MemoryRender:
    """Fit-or-degrade over the candidates, then the final shrink loop.

    ``in_place_detail=False`` shows recovered units after the whole timeline (in time
    order) instead of in place of their records, so the timeline stays a stable prefix of
    the memory text from one render to the next (the prompt-cache-stable layout).
    """
    def credit_of(pos: int) -> int | None:
        item = timeline.item_at(pos)
        if item is None:
            return 0  # its record is hidden this call: the text goes after the mark
        return item.tokens if item.level == 0 and in_place_detail else 0

    elements = fit_or_degrade(notes, cands, room, index, cfg, tokenizer, excerpt_scores, credit_of, excerpts)
    assembler = Assembler(timeline, tokenizer, detail_after=not in_place_detail)
    text, n, kept = shrink(assembler, elements, allowance)
    spent = {"timeline": timeline.total
             - sum(timeline.item_at(e.pos).tokens for e in kept if e.in_place),  # type: ignore[union-attr]
             "raw": sum(e.tokens for e in kept if e.resolution == "raw"),
             "excerpt": sum(e.tokens for e in kept if e.resolution == "excerpt"), "pieces": 0}
    runs = timeline_runs(timeline)
    rows = unit_rows(notes, runs, {e.pos: e.resolution for e in kept}, {c.pos: (c.why, c.score) for c in cands})
    return MemoryRender(text, n, spent, rows, unit_runs=runs, dropped=len(elements) - len(kept),
                        records=assembler.records_prefix(kept))
