"""Okapi BM25 over pieces, as an incremental inverted index.

Hand-written on purpose (DESIGN.md section 9): rank-bm25 scores with a Python loop over
every document (72 ms a query at 10k pieces) and, like bm25s, cannot append without a
full rebuild. Here postings grow as units are written; each term keeps its postings
as Python lists plus a numpy copy refreshed only when the term gained documents, so a
query costs a few vectorised operations per query term. IDF is Lucene's
``log(1 + (N - n + 0.5) / (n + 0.5))`` over the whole store; rank-bm25 is the test
oracle for the scores.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

_MARKUP = re.compile(r"<[^<>\n]{0,80}>|```[a-zA-Z0-9_+-]*|&[a-z]+;")
_WORD = re.compile(r"[a-z0-9_]+")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """English stop words (scikit-learn's list, already a dependency of sentence-transformers)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def terms(text: str) -> list[str]:
    """Lower-cased content words of a text, markup and stop words removed (with repeats)."""
    stops = stop_words()
    words = _WORD.findall(_MARKUP.sub(" ", text.lower()))
    return [w.strip("_") for w in words
            if w.strip("_") and w not in stops and (len(w) > 1 or w.isdigit())]


def content_words(text: str) -> set[str]:
    """The query form: the set of content words."""
    return set(terms(text))


class _Postings:
    __slots__ = ("array_docs", "array_tfs", "docs", "tfs")

    def __init__(self) -> None:
        self.docs: list[int] = []
        self.tfs: list[int] = []
        self.array_docs = np.empty(0, dtype=np.int64)
        self.array_tfs = np.empty(0, dtype=np.float64)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        n_cached = len(self.array_docs)
        if n_cached < len(self.docs):
            self.array_docs = np.concatenate([self.array_docs, np.asarray(self.docs[n_cached:], np.int64)])
            self.array_tfs = np.concatenate([self.array_tfs, np.asarray(self.tfs[n_cached:], np.float64)])
        return self.array_docs, self.array_tfs


class BM25Index:
    """Append-only BM25 index; documents are numbered 0.. in the order they were added."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._postings: dict[str, _Postings] = {}
        self._lengths: list[int] = []
        self._lengths_array = np.empty(0, dtype=np.float64)
        self._total = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def add(self, texts: Iterable[str]) -> range:
        """Index texts; returns the document numbers they received."""
        start = len(self._lengths)
        for text in texts:
            doc = len(self._lengths)
            words = terms(text)
            self._lengths.append(len(words))
            self._total += len(words)
            for term, tf in Counter(words).items():
                p = self._postings.get(term)
                if p is None:
                    p = self._postings[term] = _Postings()
                p.docs.append(doc)
                p.tfs.append(tf)
        return range(start, len(self._lengths))

    def idf(self, term: str) -> float:
        n = len(self._postings[term].docs) if term in self._postings else 0
        big_n = len(self._lengths)
        return math.log(1.0 + (big_n - n + 0.5) / (n + 0.5))

    def scores(self, query: Iterable[str]) -> np.ndarray:
        """BM25 score of every document for a set of query terms (dense, float64)."""
        n_docs = len(self._lengths)
        out = np.zeros(n_docs, dtype=np.float64)
        if n_docs == 0:
            return out
        if len(self._lengths_array) < n_docs:
            self._lengths_array = np.asarray(self._lengths, dtype=np.float64)
        avgdl = self._total / n_docs if self._total else 1.0
        norm = self.k1 * (1.0 - self.b + self.b * self._lengths_array / avgdl)
        for term in set(query):
            p = self._postings.get(term)
            if p is None:
                continue
            docs, tfs = p.arrays()
            out[docs] += self.idf(term) * tfs * (self.k1 + 1.0) / (tfs + norm[docs])
        return out

    def search(self, query_text: str, top: int | None = None) -> list[tuple[int, float]]:
        """Documents with a positive score for the content words of ``query_text``, best first
        (equal scores: earlier document first)."""
        s = self.scores(content_words(query_text))
        hits = np.flatnonzero(s > 0)
        order = hits[np.lexsort((hits, -s[hits]))]
        if top is not None:
            order = order[:top]
        return [(int(d), float(s[d])) for d in order]
