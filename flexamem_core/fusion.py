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

import numpy as np

from .config import FlexAMemConfig


def ranks(values: np.ndarray) -> np.ndarray:
    """1-based rank of each value, largest first, ties to the lower position."""
    order = np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")  # stable: ties by position
    out = np.empty(len(order), dtype=np.float64)
    out[order] = np.arange(1, len(order) + 1, dtype=np.float64)
    return out


def fuse(bm25: np.ndarray, cosine: np.ndarray, cfg: FlexAMemConfig) -> np.ndarray:
    """Fused scores of the pieces whose BM25 scores and cosines are given (aligned arrays):
    positive for every piece under ``rrf`` and ``blend``; under ``bm25``, the BM25 scores."""
    bm25 = np.asarray(bm25, dtype=np.float64)
    cosine = np.asarray(cosine, dtype=np.float64)
    if cfg.fusion == "bm25" or len(bm25) == 0:
        return bm25.copy()
    w = cfg.fusion_weight
    lexical = bm25 > 0
    if cfg.fusion == "rrf":
        out = w / (cfg.fusion_k + ranks(cosine))
        if lexical.any():  # the matching pieces rank first, so ranking them alone gives the same ranks
            out[lexical] += (1.0 - w) / (cfg.fusion_k + ranks(bm25[lexical]))
        return out
    top = float(bm25.max())
    lo, hi = float(cosine.min()), float(cosine.max())
    dense = (cosine - lo) / (hi - lo) if hi > lo else np.ones_like(cosine)
    lex = bm25 / top if top > 0 else np.zeros_like(bm25)
    return (1.0 - w) * lex + w * dense + 1e-12  # + epsilon: every considered piece is positive


def fused_over(docs: np.ndarray, bm25_all: np.ndarray, q_vec: np.ndarray, piece_cosines, cfg: FlexAMemConfig,
               n_docs: int) -> np.ndarray:
    """Dense array over all ``n_docs`` documents: the fused score of each of ``docs``, 0 elsewhere.

    ``piece_cosines(docs, q_vec)`` gives the stored-vector cosines (``NamespaceIndex``)."""
    out = np.zeros(n_docs, dtype=np.float64)
    if len(docs) == 0:
        return out
    cos = piece_cosines(docs, q_vec) if cfg.fusion != "bm25" else np.zeros(len(docs))
    out[docs] = fuse(bm25_all[docs], cos, cfg)
    return out
