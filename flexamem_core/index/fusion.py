"""Hybrid evidence ranking: the lexical (BM25) and dense (cosine) rankings of pieces, fused.

BM25 finds the exact words a query names (an identifier, a name, a number); the cosine of
MiniLM vectors finds a paraphrase that shares none of them. With
``FlexAMemConfig.piece_vectors`` every piece carries its own vector (embedded once when its
unit was written); without, a piece stands in with its unit's note vector. Either way a
render ranks pieces both ways with one matrix product and no model call but the query's.

``fusion="rrf"`` (the default) is reciprocal rank fusion: a piece scores
``(1 - w) / (k + r_bm25) + w / (k + r_cos)`` with its 1-based ranks among the pieces
considered; a piece that matches no query word has no lexical term. ``fusion="blend"``
mixes the scores themselves, BM25 divided by its maximum and the cosine min-max scaled
over the pieces considered. ``fusion="bm25"`` is BM25 alone, cosine only breaking ties.
All are deterministic: equal values rank by document number.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .arrays import take_ascending

if TYPE_CHECKING:
    from ..config import FlexAMemConfig


def ranks(values: np.ndarray) -> np.ndarray:
    """1-based rank of each value, largest first, ties to the lower position."""
    values = np.asarray(values)
    if len(values) >= 1 << 32 or np.isnan(values).any():
        order = np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")  # stable: ties by position
    elif values.dtype == np.float32:
        order = _float32_order(values)
    else:
        order = _float64_order(np.asarray(values, dtype=np.float64))
    out = np.empty(len(order), dtype=np.float64)
    out[order] = np.arange(1, len(order) + 1, dtype=np.float64)
    return out


def _float32_order(values: np.ndarray) -> np.ndarray:
    """The order of ``np.argsort(-values, kind="stable")`` for float32 values without NaN.

    Hand-written because numpy's stable sort is the slow part of ranking every piece: each
    value becomes a rank key placed above its position in one 64-bit integer, so the keys
    are unique and numpy's faster unstable sort gives the stable order. Here the key is the
    value's bits made to sort as an unsigned integer, largest value first.
    """
    bits = (values + np.float32(0)).view(np.uint32)  # -0.0 becomes 0.0: equal values, one key
    ascending = np.where(bits >> np.uint32(31), ~bits, bits | np.uint32(0x80000000))
    return _keyed_order(~ascending)


def _float64_order(values: np.ndarray) -> np.ndarray:
    """The order of ``np.argsort(-values, kind="stable")`` for float64 values without NaN.

    Ordered by their float32 roundings first (:func:`_float32_order`, faster than sorting
    the float64 values): that order is the exact one whenever the values it lists never
    increase, since equal values have equal roundings and so stay in position order. Where two
    values round to one float32 out of order (rare: BM25 scores and reciprocal ranks differ
    by far more), the values' own distinct ranks are sorted instead.
    """
    with np.errstate(over="ignore"):  # beyond float32's range: infinite, caught below
        rounded = values.astype(np.float32)
    order = _float32_order(rounded)
    listed = values[order]
    if len(listed) < 2 or bool((listed[1:] <= listed[:-1]).all()):
        return order
    return _keyed_order(np.unique(-values, return_inverse=True)[1])


def _keyed_order(keys: np.ndarray) -> np.ndarray:
    """Positions ordered by ``keys`` (at most 32-bit unsigned integers), ties by position."""
    packed = keys.astype(np.uint64) << np.uint64(32) | np.arange(len(keys), dtype=np.uint64)
    return (np.sort(packed) & np.uint64(0xFFFFFFFF)).astype(np.int64)


def fuse(bm25: np.ndarray, cosine: np.ndarray, cfg: FlexAMemConfig, cosine_ranks: np.ndarray | None = None
         ) -> np.ndarray:
    """Fused scores of the pieces whose BM25 scores and cosines are given (aligned arrays):
    positive for every piece under ``rrf`` and ``blend``; under ``bm25``, the BM25 scores.
    ``cosine_ranks``: ``ranks(cosine)`` when the caller has them."""
    bm25 = np.asarray(bm25, dtype=np.float64)
    if cfg.tuning.fusion == "bm25" or len(bm25) == 0:
        return bm25.copy()
    w = cfg.tuning.fusion_weight
    lexical = bm25 > 0
    if cfg.tuning.fusion == "rrf":
        rc = ranks(np.asarray(cosine)) if cosine_ranks is None else cosine_ranks  # float32 ranks fastest as is
        out = w / (cfg.tuning.fusion_k + rc)
        if lexical.any():  # the matching pieces rank first, so ranking them alone gives the same ranks
            out[lexical] += (1.0 - w) / (cfg.tuning.fusion_k + ranks(bm25[lexical]))
        return out
    cosine = np.asarray(cosine, dtype=np.float64)
    top = float(bm25.max())
    lo, hi = float(cosine.min()), float(cosine.max())
    dense = (cosine - lo) / (hi - lo) if hi > lo else np.ones_like(cosine)
    lex = bm25 / top if top > 0 else np.zeros_like(bm25)
    return (1.0 - w) * lex + w * dense + 1e-12  # + epsilon: every considered piece is positive


class PieceCosines(Protocol):
    """What :func:`fused_over` and :func:`fused_ranking` read of an index (``NamespaceIndex``):
    the stored-vector cosines of piece documents, their ranks, and their ranking by notes."""

    def piece_cosines(self, docs: np.ndarray, q_vec: np.ndarray) -> np.ndarray: ...

    def piece_cosine_ranks(self, docs: np.ndarray, q_vec: np.ndarray) -> np.ndarray: ...

    def note_groups(self, docs: np.ndarray, q_vec: np.ndarray) -> Any: ...


def fused_over(docs: np.ndarray, bm25_all: np.ndarray, q_vec: np.ndarray, index: PieceCosines,
               cfg: FlexAMemConfig, n_docs: int) -> np.ndarray:
    """Dense array over all ``n_docs`` documents: the fused score of each of ``docs``, 0 elsewhere."""
    out = np.zeros(n_docs, dtype=np.float64)
    if len(docs) == 0:
        return out
    if cfg.tuning.fusion == "bm25":
        out[docs] = fuse(bm25_all[docs], np.zeros(len(docs)), cfg)
    elif cfg.tuning.fusion == "rrf":
        out[docs] = fuse(bm25_all[docs], np.zeros(0), cfg, index.piece_cosine_ranks(docs, q_vec))
    else:
        out[docs] = fuse(bm25_all[docs], index.piece_cosines(docs, q_vec), cfg)
    return out


def best_first(hits: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` best-scoring hits (plus every hit tied with the k-th), best first, ties by position."""
    if k < len(hits):
        values = scores[hits]
        kth = np.partition(values, len(hits) - k)[len(hits) - k]
        hits = hits[values >= kth]
    return hits[np.lexsort((hits, -scores[hits]))]


class Ranking(Protocol):
    """Piece documents in fused order, best first, ties by document: what the piece walk and
    the automatic signals read, without asking for every document's score."""

    def __len__(self) -> int: ...

    def best(self, k: int) -> np.ndarray:
        """The ``k`` best documents and every one tied with the k-th, best first (int64: the
        walk asks for thousands, and a Python list of them is slow to build and read)."""
        ...

    def score(self, docs: Sequence[int] | np.ndarray) -> np.ndarray: ...

    def smallest(self, tokens: np.ndarray) -> int:
        """At most the fewest tokens of a ranked document (a bound the walk stops at)."""
        ...

    def without(self, docs: Sequence[int]) -> Ranking: ...


class DenseRanking:
    """``hits`` (ascending documents) ranked by a score array over all documents."""

    def __init__(self, hits: np.ndarray, scores: np.ndarray) -> None:
        self.hits = np.asarray(hits, dtype=np.int64)
        self.scores = scores

    def __len__(self) -> int:
        return len(self.hits)

    def best(self, k: int) -> np.ndarray:
        return best_first(self.hits, self.scores, k)

    def score(self, docs: Sequence[int] | np.ndarray) -> np.ndarray:
        return self.scores[np.asarray(docs, dtype=np.int64)]

    def smallest(self, tokens: np.ndarray) -> int:
        return int(np.min(tokens[self.hits])) if len(self.hits) else 0

    def without(self, docs: Sequence[int]) -> DenseRanking:
        return DenseRanking(without(self.hits, docs), self.scores)


class NoteRanking:
    """Reciprocal rank fusion over documents ranked by their notes (:class:`~.index.NoteGroups`),
    exactly as :func:`fused_over` scores them, without a score per document: a piece that
    matches no query word scores ``w / (k + its cosine rank)``, which falls as the rank grows,
    so the ``n`` best are among the matching pieces and the ``n`` best-ranked others: a walk
    looks at those, not at a score of every piece."""

    def __init__(self, groups: Any, bm25_all: np.ndarray, cfg: FlexAMemConfig) -> None:
        self.groups = groups
        self.cfg = cfg
        docs = groups.docs
        lexical = take_ascending(bm25_all, docs)
        #: Positions (into ``groups.docs``, ascending) of the matching pieces, and their scores.
        self.lex_pos = np.flatnonzero(lexical > 0)
        w, k = cfg.tuning.fusion_weight, cfg.tuning.fusion_k
        # the matching pieces rank first by BM25, so ranking them alone gives their ranks
        self.lex_score = w / (k + groups.ranks_at(self.lex_pos)) + (1.0 - w) / (k + ranks(lexical[self.lex_pos])) \
            if len(self.lex_pos) else np.zeros(0)
        #: Positions of the documents left out (:meth:`without`), ascending.
        self.excluded_pos = np.zeros(0, dtype=np.int64)
        self._skip: np.ndarray | None = None  # True at the matching and the left-out positions
        self._excluded_mask: np.ndarray | None = None
        self._smallest: int | None = None

    def __len__(self) -> int:
        return len(self.groups.docs) - len(self.excluded_pos)

    def _scores_at(self, positions: np.ndarray) -> np.ndarray:
        w, k = self.cfg.tuning.fusion_weight, self.cfg.tuning.fusion_k
        out = w / (k + self.groups.ranks_at(positions))
        at, hit = found_at(self.lex_pos, positions)
        out[hit] = self.lex_score[at[hit]]
        return out

    def score(self, docs: Sequence[int] | np.ndarray) -> np.ndarray:
        return self._scores_at(np.searchsorted(self.groups.docs, np.asarray(docs, dtype=np.int64)))

    def best(self, k: int) -> np.ndarray:
        docs = self.groups.docs
        if self._skip is None:
            self._skip = self._skip_excluded().copy()
            self._skip[self.lex_pos] = True
        # the k best-ranked others (positions come in rank order), asked for in growing numbers
        # when many of the best-ranked are matching or left out
        n = k + len(self.excluded_pos)
        while True:
            pos = self.groups.best_positions(n)
            others = pos[~self._skip[pos]]
            if len(others) >= k or len(pos) < n:
                break
            n *= 2
        others = others[:k]
        # the k best matching pieces, and every one tied with the k-th (as best_first does)
        lex, lex_score = self.lex_pos, self.lex_score
        if len(self.excluded_pos) and len(lex):
            kept = ~self._skip_excluded()[lex]
            lex, lex_score = lex[kept], lex_score[kept]
        if k < len(lex):
            kth = np.partition(lex_score, len(lex) - k)[len(lex) - k]
            top = lex_score >= kth
            lex, lex_score = lex[top], lex_score[top]
        # Every document left out scores less than the k-th best candidate: so the k best
        # candidates, and every one tied with the k-th, are those of all documents.
        w, c = self.cfg.tuning.fusion_weight, self.cfg.tuning.fusion_k
        at = np.concatenate((lex, others))
        cand = docs[at]
        scores = np.concatenate((lex_score, w / (c + self.groups.ranks_at(others))))
        order = np.lexsort((cand, -scores))
        cand, scores = cand[order], scores[order]
        if k < len(cand):
            cand = cand[scores >= scores[k - 1]] if k > 0 else cand[:0]
        return cand

    def _skip_excluded(self) -> np.ndarray:
        """True at the left-out positions."""
        if self._excluded_mask is None:
            self._excluded_mask = np.zeros(len(self.groups.docs), dtype=bool)
            self._excluded_mask[self.excluded_pos] = True
        return self._excluded_mask

    def smallest(self, tokens: np.ndarray) -> int:
        docs = self.groups.docs
        if self._smallest is None:  # of every document: shared with the rankings made by without()
            self._smallest = int(np.min(take_ascending(tokens, docs))) if len(docs) else 0
        gone = docs[self.excluded_pos]
        if len(gone) and bool((tokens[gone] == self._smallest).any()):  # rare: the exact one
            keep = np.ones(len(docs), dtype=bool)
            keep[self.excluded_pos] = False
            return int(np.min(tokens[docs[keep]])) if keep.any() else 0
        return self._smallest

    def without(self, docs: Sequence[int]) -> NoteRanking:
        at, found = found_at(self.groups.docs, np.asarray(docs, dtype=np.int64))
        out = copy.copy(self)
        out.excluded_pos = np.union1d(self.excluded_pos, at[found]).astype(np.int64)
        out._skip = out._excluded_mask = None
        return out


def fused_ranking(docs: np.ndarray, bm25_all: np.ndarray, q_vec: np.ndarray, index: PieceCosines,
                  cfg: FlexAMemConfig) -> Ranking:
    """The fused order of ``docs`` (ascending): by notes where the index ranks them so under
    ``rrf`` (:class:`NoteRanking`), else by the dense fused scores (:func:`fused_over`). With
    ``fusion_weight`` 0 every piece that matches no word scores 0, all tied, so the dense
    order it is."""
    if cfg.tuning.fusion == "rrf" and cfg.tuning.fusion_weight > 0 and len(docs):
        groups = index.note_groups(docs, q_vec)
        if groups is not None:
            return NoteRanking(groups, bm25_all, cfg)
    return DenseRanking(docs, fused_over(docs, bm25_all, q_vec, index, cfg, len(bm25_all)))


def found_at(ascending: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``values`` is in ``ascending`` (``np.searchsorted``), and whether it is there."""
    at = np.searchsorted(ascending, values)
    if len(ascending) == 0:
        return at, np.zeros(len(at), dtype=bool)
    return at, (at < len(ascending)) & (ascending[np.minimum(at, len(ascending) - 1)] == values)


def without(hits: np.ndarray, some: Sequence[int] | np.ndarray) -> np.ndarray:
    """``hits`` (ascending) less the documents in ``some``: a binary search per document
    left out, where ``np.isin`` would sort all the hits each time."""
    drop = np.asarray(some, dtype=np.int64)
    if len(drop) == 0 or len(hits) == 0:
        return hits
    at, found = found_at(hits, drop)
    keep = np.ones(len(hits), dtype=bool)
    keep[at[found]] = False
    return hits[keep]
