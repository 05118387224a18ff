"""The old units unit recovery visits: seeds by the fused note and piece rankings, their links
and time neighbours, discounted by lambda (the paper's Eq. 2); and what scores excerpts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..index.arrays import take_ascending
from ..index.fusion import fused_over, ranks
from ..index.namespace import NamespaceIndex, top_k
from ..model.schema import Note

if TYPE_CHECKING:
    from ..config import FlexAMemConfig


@dataclass
class Candidate:
    """A unit that unit recovery visits, with its score g and why it was reached."""

    pos: int
    score: float
    why: str


class _Prefix:
    """Key -> position for old units that are exactly the first ``n`` notes of the index
    (the index's own map, read in place of a dict of every old unit made per call)."""

    def __init__(self, position: dict[str, int], n: int) -> None:
        self.position = position
        self.n = n

    def __contains__(self, key: object) -> bool:
        return self.position.get(key, self.n) < self.n  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> int:
        if key not in self:
            raise KeyError(key)
        return self.position[key]


def positions(notes: Sequence[Note], index: NamespaceIndex) -> Mapping[str, int]:
    """Each old unit's position among ``notes``, by key."""
    if notes and index.is_prefix(notes[0].unit_key, notes[-1].unit_key, len(notes)):
        return _Prefix(index.position, len(notes))
    return {nt.unit_key: p for p, nt in enumerate(notes)}


def candidates(q_vec: np.ndarray, notes: Sequence[Note], index: NamespaceIndex,
               cfg: FlexAMemConfig, query_text: str) -> list[Candidate]:
    """Candidates in decreasing g: seeds, their links and time neighbours (Eq. 2)."""
    n = len(notes)
    if n == 0:
        return []
    if index.is_prefix(notes[0].unit_key, notes[-1].unit_key, n):
        # The usual case: the old units are the first n notes written (positions only increase).
        rows = np.arange(n, dtype=np.int64)
        cos = index.note_cosines(q_vec)[:n]
    else:
        rows = np.fromiter((index.position[nt.unit_key] for nt in notes), dtype=np.int64, count=n)
        cos = index.note_cosines(q_vec)[rows]
    pos_of = positions(notes, index)
    if cfg.tuning.fused_seeds and cfg.tuning.fusion != "bm25":
        best_piece = _best_piece_scores(notes, rows, index, query_text, q_vec, cfg)
        # the old notes' ranks, kept by the index: the piece ranking by notes made them
        cos_ranks = index.note_cosine_ranks(q_vec, n) if rows[-1] == n - 1 else None
        cos = _fused_units(cos, best_piece, cfg, cos_ranks)
    seeds = top_k(cos, cfg.tuning.seeds)
    best: dict[int, tuple[float, str]] = {}

    def reach(p: int, score: float, why: str) -> None:
        if p not in best or score > best[p][0]:
            best[p] = (score, why)

    for s in seeds:
        s = int(s)
        c = float(cos[s])
        reach(s, c, "seed")
        for key in sorted(index.links_of(notes[s].unit_key)):
            if key in pos_of and pos_of[key] != s:
                reach(pos_of[key], cfg.tuning.link_discount * c, "link")
        for nb in (s - 1, s + 1):
            if 0 <= nb < n:
                reach(nb, cfg.tuning.link_discount * c, "time neighbour")
    return [Candidate(p, sc, why) for p, (sc, why) in sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))]


def _best_piece_scores(notes: Sequence[Note], rows: np.ndarray, index: NamespaceIndex, query_text: str,
                       q_vec: np.ndarray, cfg: FlexAMemConfig) -> np.ndarray:
    """Per old unit, the fused score (BM25 with ``query_text`` and cosine with ``q_vec``) of its
    best piece; -inf for a unit without pieces."""
    n_docs = len(index.doc_unit)
    best = np.full(len(notes), -np.inf)
    if n_docs == 0:
        return best
    bm25 = index.bm25.scores(index.bm25.query_terms(query_text, cfg.tuning.query_terms))
    docs = old_docs(notes, index)
    if len(docs) == 0:
        return best
    to_old = np.full(len(index.notes), -1, dtype=np.int64)
    to_old[rows] = np.arange(len(notes))
    groups = index.note_groups(docs, q_vec) if cfg.tuning.fusion == "rrf" else None
    if groups is not None:
        # Ranked by their notes (agents): a note's pieces hold consecutive cosine ranks from
        # its first, so a unit's best piece is its first or one with a lexical match. The same
        # values as the dense fusion below, at the cost of the units and the matching pieces.
        w, k = cfg.tuning.fusion_weight, cfg.tuning.fusion_k
        best[to_old[index.doc_note_array()[docs[groups.starts]]]] = w / (k + groups.first)
        lexical = take_ascending(bm25, docs)
        hit = np.flatnonzero(lexical > 0)
        if len(hit):
            fused_hit = w / (k + groups.ranks_at(hit))
            fused_hit += (1.0 - w) / (k + ranks(lexical[hit]))
            np.maximum.at(best, to_old[index.doc_note_array()[docs[hit]]], fused_hit)
        return best
    fused = fused_over(docs, bm25, q_vec, index, cfg, n_docs)
    owner = to_old[index.doc_note_array()[docs]]
    values = fused[docs]
    if len(owner) > 1 and bool((owner[1:] < owner[:-1]).any()):  # sorted when the old units are a prefix
        order = np.argsort(owner, kind="stable")
        owner, values = owner[order], values[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    best[owner[starts]] = np.maximum.reduceat(values, starts)
    return best


def _fused_units(note_cos: np.ndarray, best_piece: np.ndarray, cfg: FlexAMemConfig,
                 cos_ranks: np.ndarray | None = None) -> np.ndarray:
    """Seed scores: the note cosine ranking and the best-piece ranking of the units, fused by
    reciprocal ranks (weight ``fusion_weight`` on the pieces). ``cos_ranks``: ``ranks(note_cos)``
    when the caller has them."""
    w = cfg.tuning.fusion_weight
    out = (1.0 - w) / (cfg.tuning.fusion_k + (ranks(note_cos) if cos_ranks is None else cos_ranks))
    has = np.isfinite(best_piece)
    if has.any():
        out[has] += w / (cfg.tuning.fusion_k + ranks(best_piece[has]))
    return out


def excerpt_scores(index: NamespaceIndex, ranges: Sequence[range], query_text: str, q_vec: np.ndarray,
                   cfg: FlexAMemConfig) -> np.ndarray:
    """Scores (dense over all piece documents, 0 outside ``ranges``) that rank the excerpt
    pieces of the candidate units: BM25 for ``query_text``, fused with the stored piece
    cosines unless ``fused_excerpts`` is off (then only BM25 matches are excerpted)."""
    bm25 = index.bm25.scores_in(index.bm25.query_terms(query_text, cfg.tuning.query_terms), ranges)
    if not cfg.tuning.fused_excerpts or cfg.tuning.fusion == "bm25":
        return bm25
    docs = np.unique(np.concatenate([np.arange(r.start, r.stop) for r in ranges if len(r)] or
                                    [np.zeros(0, dtype=np.int64)])).astype(np.int64)
    return fused_over(docs, bm25, q_vec, index, cfg, len(bm25))


def focus_first(cands: Sequence[Candidate], notes: Sequence[Note], index: NamespaceIndex,
                words: set[str]) -> list[Candidate]:
    """The candidates with the old unit holding the best BM25 piece for ``words`` first.

    Cosine over a whole unit cannot tell which of thirty similar outputs printed the token
    a user asks about; the lexical match can."""
    if not words or not notes:
        return list(cands)
    ranges = [index.unit_docs.get(nt.unit_key, range(0)) for nt in notes]
    scores = index.bm25.scores_in(words, ranges)
    best, best_pos = 0.0, -1
    for pos, r in enumerate(ranges):
        if len(r):
            top = float(scores[r.start:r.stop].max())
            if top > best:
                best, best_pos = top, pos
    if best_pos < 0:
        return list(cands)
    rest = [c for c in cands if c.pos != best_pos]
    own = next((c.score for c in cands if c.pos == best_pos), 0.0)  # its g, if reached at all
    return [Candidate(best_pos, own, "focus match"), *rest]


def old_docs(notes: Sequence[Note], index: NamespaceIndex) -> np.ndarray:
    """The piece documents of the old units, ascending (a chain's positions only increase)."""
    if notes and index.is_prefix(notes[0].unit_key, notes[-1].unit_key, len(notes)):
        # The usual case: the old units are the first notes written, so their docs are a prefix.
        last = index.unit_docs.get(notes[-1].unit_key)
        return np.arange(last.stop if last is not None else 0, dtype=np.int64)
    ranges = [index.unit_docs.get(nt.unit_key, range(0)) for nt in notes]
    docs = [np.arange(r.start, r.stop, dtype=np.int64) for r in ranges if len(r)]
    return np.concatenate(docs) if docs else np.zeros(0, dtype=np.int64)
