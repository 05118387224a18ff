"""Piece recovery: the best pieces of all old units (BM25 fused with the pieces' stored
cosines), priced with their framing and taken while they fit, shown after the timeline
grouped by unit in time order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ..index.fusion import DenseRanking, Ranking, fused_ranking
from ..index.namespace import NamespaceIndex
from ..model.protocols import Tokenizer
from ..model.schema import Note, Piece
from .assembly import Assembler, Element, MemoryRender, Segments, shrink, stored_raw_tokens
from .candidates import old_docs, positions
from .joins import PIECES_HEADER, group_header, verbatim_join
from .piece_walk import Framing, select_pieces
from .report import timeline_runs, unit_rows
from .timeline import Timeline

if TYPE_CHECKING:
    from ..config import FlexAMemConfig


def piece_recovery(notes: Sequence[Note], timeline: Timeline, query_text: str, q_vec: np.ndarray,
                   room: int, allowance: int, index: NamespaceIndex, tokenizer: Tokenizer,
                   cfg: FlexAMemConfig, first: Sequence[int] = ()) -> MemoryRender:
    """The best pieces of all old units that fit, shown after the timeline.

    ``first``: piece documents taken before the ranked ones, in order, while they fit, with
    their framing counted (``mode="auto"``: all pieces of a unit, i.e. the unit whole, or of
    whole turns).

    Pieces are ranked by BM25 and by the cosine of their stored vectors with the query,
    fused (``fusion``): a render never calls the
    embedding model for pieces. Chosen pieces are shown in time order, one header per run
    of units with the same label (a conversation's date, an agent's steps).
    """
    bm25 = index.bm25.scores(index.bm25.query_terms(query_text, cfg.tuning.query_terms))
    old = old_docs(notes, index)
    ranking: Ranking = DenseRanking(old[bm25[old] > 0], bm25) if cfg.tuning.fusion == "bm25" \
        else fused_ranking(old, bm25, q_vec, index, cfg)
    tokens = index.doc_tokens_array()
    pos_of = positions(notes, index)
    shown = _ShownUnits(index)
    framing = Framing(index, notes, pos_of, tokenizer, shown.pieces)
    forced, room = _take_first(first, tokens, room, framing)
    if forced:
        ranking = ranking.without(forced)

    def cosine(run: list[int]) -> np.ndarray:
        return index.piece_cosines(run, q_vec)

    chosen = forced + select_pieces(ranking, tokens, room, cosine, framing)
    tail = _PiecesTail(notes, index, tokenizer, shown)
    elements = _elements(chosen, 0, pos_of, index, tokens)
    assembler = _PieceAssembler(timeline, tokenizer)
    text, n, kept = shrink(assembler, elements, allowance, tail)
    if len(kept) == len(chosen) and allowance - n > 0:
        # The framing estimate is an upper bound (a later neighbour joins a run): fill the
        # room it left, counted exactly this time, with the next best pieces.
        more = select_pieces(ranking.without(chosen), tokens, allowance - n, cosine, framing)
        if more:
            elements += _elements(more, len(chosen), pos_of, index, tokens)
            chosen = [*chosen, *more]
            text, n, kept = shrink(assembler, elements, allowance, tail)
    return replace(_rendered(text, n, kept, len(chosen), timeline, notes, index, ranking, bm25, framing),
                   records=assembler.records_prefix(()))  # the pieces follow the whole timeline


def _take_first(first: Sequence[int], tokens: np.ndarray, room: int, framing: Framing) -> tuple[list[int], int]:
    """The ``first`` documents that fit in order, with their framing; returns them and the room left."""
    forced: list[int] = []
    for d in first:
        cost = int(tokens[d]) + framing.cost(d)
        if cost > room:
            break  # what is taken stays one contiguous run
        forced.append(d)
        room -= cost
        framing.take(d, cost)
    return forced, room


def _elements(docs: Sequence[int], first_rank: int, pos_of: Mapping[str, int], index: NamespaceIndex,
              tokens: np.ndarray) -> list[Element]:
    """Elements for chosen documents (the doc number in ``text``; the tail renders them by unit)."""
    return [Element(pos_of[index.doc_unit[d]], first_rank + r, "piece", str(d), int(tokens[d]), False)
            for r, d in enumerate(docs)]


def _rendered(text: str, n: int, kept: Sequence[Element], n_chosen: int, timeline: Timeline,
              notes: Sequence[Note], index: NamespaceIndex, ranking: Ranking, bm25: np.ndarray,
              framing: Framing) -> MemoryRender:
    """The memory of a piece recovery with its report: what each kept piece scored, per unit counts."""
    spent = {"timeline": timeline.total, "raw": 0, "excerpt": 0, "pieces": max(0, n - timeline.total)}
    kept_scores = ranking.score([int(e.text) for e in kept]) if kept else np.zeros(0)
    pieces = [{"unit": notes[e.pos].unit_key, "piece": index.doc_piece[int(e.text)],
               "score": round(float(score), 6), "bm25": round(float(bm25[int(e.text)]), 4),
               "rank": e.rank} for e, score in zip(kept, kept_scores)]
    counts: dict[int, int] = {}
    for e in kept:
        counts[e.pos] = counts.get(e.pos, 0) + 1
    runs = timeline_runs(timeline)
    return MemoryRender(text, n, spent, unit_rows(notes, runs, {}, {}, counts), pieces, unit_runs=runs,
                        dropped=n_chosen - len(kept), charged=framing.charged)


class _ShownUnits:
    """The pieces and raw texts of the units a recovery shows, each read from the store once."""

    def __init__(self, index: NamespaceIndex) -> None:
        self.store, self.namespace = index.store, index.namespace
        self._pieces: dict[str, list[Piece]] = {}
        self.raws: dict[str, str] = {}

    def pieces(self, key: str) -> list[Piece]:
        if key not in self._pieces:
            self._pieces[key] = self.store.pieces(self.namespace, key)
        return self._pieces[key]

    def raw(self, key: str) -> str:
        if key not in self.raws:
            self.raws[key] = self.store.get_unit(self.namespace, key).raw
        return self.raws[key]


class _PiecesTail:
    """The chosen pieces' lines after the timeline: the pieces header, one group header per
    run of units sharing a label, each unit's pieces as verbatim runs; a unit shown whole
    carries its stored count (see :class:`Element`)."""

    def __init__(self, notes: Sequence[Note], index: NamespaceIndex, tokenizer: Tokenizer,
                 shown: _ShownUnits) -> None:
        self.notes, self.index, self.tokenizer, self.shown = notes, index, tokenizer, shown

    def __call__(self, kept: Sequence[Element]) -> Segments:
        if not kept:
            return ()
        by_unit: dict[int, list[int]] = {}
        for e in kept:
            by_unit.setdefault(e.pos, []).append(int(e.text))
        out: list[list[tuple[str, int | None]]] = [[(PIECES_HEADER, None)]]
        label, prev, prev_ends = None, -2, False
        for pos in sorted(by_unit):
            note = self.notes[pos]
            key = note.unit_key
            plist = self.shown.pieces(key)
            ps = sorted((plist[self.index.doc_piece[d]] for d in by_unit[pos]), key=lambda p: p.index)
            joined = verbatim_join(ps, plist, lambda k=key: self.shown.raw(k))
            if note.label != label:
                label = note.label
                out.append([(group_header(label), None)])
            elif out[-1][-1][0].endswith("\n...") and joined.startswith("..."):
                joined = joined[4:]  # one mark between two units of one group, not two
            elif prev_ends and ps[0].index == 0:
                # the previous unit's text runs to its end and this one's from its start: the
                # turns meet as in the conversation (a blank line) if the units are neighbours,
                # else the units between them are left out, and marked
                if pos == prev + 1:
                    out[-1].append(("\n", None))
                else:
                    out.append([("...", None)])
            whole = len(ps) == len(plist) and self.shown.raws.get(key) == joined
            out.append([(joined, stored_raw_tokens(note, self.tokenizer) if whole else None)])
            prev, prev_ends = pos, ps[-1].index == len(plist) - 1
        return tuple(segment for k, line in enumerate(out) for segment in ([("\n", None)] if k else []) + line)


class _PieceAssembler(Assembler):
    """Piece elements never replace records: they are rendered by the tail only."""

    def segments(self, elements: Sequence[Element], tail: str | Segments = "") -> list[tuple[str, int | None]]:
        return super().segments((), tail)
