"""Okapi BM25 over pieces, as an incremental inverted index.

Hand-written on purpose (DESIGN.md section 9): rank-bm25 scores with a Python loop over
every document and, like bm25s, cannot append without a full rebuild. Here postings grow
as units are written; each term keeps its postings in append-only numpy buffers, so a
query costs a few vectorised operations per query term, and :meth:`BM25Index.scores_in`
scores only the documents of the units asked for. IDF is Lucene's
``log(1 + (N - n + 0.5) / (n + 0.5))`` over the whole store; rank-bm25 is the test
oracle for the scores.
"""

from __future__ import annotations

import importlib.util
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from .arrays import GrowableArray

_MARKUP = re.compile(r"<[^<>\n]{0,80}>|```[a-zA-Z0-9_+-]*|&[a-z]+;")
_WORD = re.compile(r"[a-z0-9_]+")


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    """English stop words: scikit-learn's list (a dependency of sentence-transformers).

    It is read from its own module file, which imports nothing: importing scikit-learn
    takes seconds, which a process whose embedder does not load it (an API embedder)
    would otherwise pay on its first render. Falls back to the import if the file moved.
    """
    spec = importlib.util.find_spec("sklearn")  # finds the package without importing it
    if spec is not None and spec.origin:
        path = Path(spec.origin).parent / "feature_extraction" / "_stop_words.py"
        module_spec = importlib.util.spec_from_file_location("_flexamem_stop_words", path) \
            if path.is_file() else None
        if module_spec is not None and module_spec.loader is not None:
            module = importlib.util.module_from_spec(module_spec)
            module_spec.loader.exec_module(module)
            words = getattr(module, "ENGLISH_STOP_WORDS", None)
            if isinstance(words, frozenset) and words:
                return words
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def terms(text: str) -> list[str]:
    """Lower-cased content words of a text, markup and stop words removed (with repeats)."""
    stops = stop_words()
    words = _WORD.findall(_MARKUP.sub(" ", text.lower()))
    return [s for w in words if (s := w.strip("_")) and w not in stops and (len(w) > 1 or w.isdigit())]


def content_words(text: str) -> set[str]:
    """The query form: the set of content words."""
    return set(terms(text))


def _concat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


class _Postings:
    """One term's documents and frequencies: Python lists while they grow (cheap appends),
    moved into numpy buffers when a query reads them (amortised O(1) per posting). Postings
    read back from a saved index stay read-only views of it until a document is added to
    them, so the first renders after a reopen copy none of them."""

    __slots__ = ("_docs", "_saved", "_tfs", "pending_docs", "pending_tfs")

    def __init__(self) -> None:
        self._docs: GrowableArray | None = None  # made on the first read: most terms are never queried
        self._tfs: GrowableArray | None = None
        self._saved: tuple[np.ndarray, np.ndarray] | None = None
        self.pending_docs: list[int] = []
        self.pending_tfs: list[int] = []

    @classmethod
    def restored(cls, docs: np.ndarray, tfs: np.ndarray) -> _Postings:
        """Postings read back from a saved index (see :meth:`BM25Index.export`), kept as they are."""
        p = cls()
        p._saved = (docs, tfs)
        return p

    def __len__(self) -> int:
        held = len(self._docs) if self._docs is not None else len(self._saved[0]) if self._saved is not None else 0
        return held + len(self.pending_docs)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._saved is not None:
            if not self.pending_docs:
                return self._saved
            docs, tfs = self._saved  # documents were added: into growable buffers, once
            self._docs, self._tfs = GrowableArray.of(docs, np.int64), GrowableArray.of(tfs, np.float64)
            self._saved = None
        if self._docs is None or self._tfs is None:
            self._docs = GrowableArray(np.int64, max(4, len(self.pending_docs)))
            self._tfs = GrowableArray(np.float64, max(4, len(self.pending_docs)))
        if self.pending_docs:
            self._docs.extend(self.pending_docs)
            self._tfs.extend(self.pending_tfs)
            self.pending_docs, self.pending_tfs = [], []
        return self._docs.view, self._tfs.view


class BM25Index:
    """Append-only BM25 index; documents are numbered 0.. in the order they were added."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._postings: dict[str, _Postings] = {}
        self._lengths = GrowableArray(np.float64)
        self._pending_lengths: list[int] = []
        self._total = 0
        # A restored index keeps its postings as one CSR block and makes a term's
        # _Postings only when it is read or grows: most terms never are.
        self._saved_vocab: dict[str, int] = {}
        self._saved: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        # The last dense scoring, by its terms and the number of documents (the index only
        # grows, so that pair names the result): one render scores the same words for the
        # automatic rule's signals and for the pieces it then shows.
        self._last_scores: tuple[frozenset[str], int, np.ndarray] | None = None
        self._last_norm: tuple[tuple[int, int], np.ndarray] | None = None
        # The last query form, by its text, limit and the number of documents (idf changes
        # only when one is added): a render asks for it with one query text up to three times.
        self._last_query: tuple[str, int | None, int, frozenset[str]] | None = None

    def __len__(self) -> int:
        return len(self._lengths) + len(self._pending_lengths)

    def _length_array(self) -> np.ndarray:
        if self._pending_lengths:
            self._lengths.extend(self._pending_lengths)
            self._pending_lengths = []
        return self._lengths.view

    def _term(self, term: str, create: bool = False) -> _Postings | None:
        p = self._postings.get(term)
        if p is None:
            j = self._saved_vocab.get(term)
            if j is not None and self._saved is not None:
                offsets, docs, tfs = self._saved
                p = self._postings[term] = _Postings.restored(docs[offsets[j]:offsets[j + 1]],
                                                              tfs[offsets[j]:offsets[j + 1]])
            elif create:
                p = self._postings[term] = _Postings()
        return p

    def export(self) -> dict[str, np.ndarray]:
        """The whole index as arrays (terms sorted, postings in CSR form), for :meth:`restore`."""
        vocab = sorted(set(self._postings) | set(self._saved_vocab))
        docs_parts: list[np.ndarray] = []
        tfs_parts: list[np.ndarray] = []
        offsets = np.zeros(len(vocab) + 1, dtype=np.int64)
        for j, term in enumerate(vocab):
            p = self._postings.get(term)
            if p is not None:
                docs, tfs = p.arrays()
            else:
                assert self._saved is not None
                o, d, t = self._saved
                k = self._saved_vocab[term]
                docs, tfs = d[o[k]:o[k + 1]], t[o[k]:o[k + 1]]
            docs_parts.append(docs)
            tfs_parts.append(tfs)
            offsets[j + 1] = offsets[j] + len(docs)
        return {"bm25_vocab": np.frombuffer("\n".join(vocab).encode(), dtype=np.uint8),
                "bm25_offsets": offsets, "bm25_docs": _concat(docs_parts, np.int32),
                "bm25_tfs": _concat(tfs_parts, np.int32),
                "bm25_lengths": self._length_array().astype(np.int32)}

    @classmethod
    def restore(cls, arrays: dict[str, np.ndarray], k1: float = 1.2, b: float = 0.75) -> BM25Index:
        """An index equal to the one :meth:`export` saved (terms are ``[a-z0-9_]``: no newline)."""
        index = cls(k1, b)
        text = arrays["bm25_vocab"].tobytes().decode()
        vocab = text.split("\n") if text else []
        offsets = arrays["bm25_offsets"]
        if len(offsets) != len(vocab) + 1:
            raise ValueError("saved BM25 index is inconsistent")
        index._saved_vocab = dict(zip(vocab, range(len(vocab))))
        # read in place: the saved arrays are read-only views of the snapshot, only ever sliced
        index._saved = (offsets, arrays["bm25_docs"], arrays["bm25_tfs"])
        lengths = arrays["bm25_lengths"]
        index._lengths = GrowableArray.of(lengths, np.float64)
        index._total = int(lengths.sum())
        return index

    def add(self, texts: Iterable[str]) -> range:
        """Index texts; returns the document numbers they received."""
        start = len(self)
        for text in texts:
            doc = len(self)
            words = terms(text)
            self._pending_lengths.append(len(words))
            self._total += len(words)
            for term, tf in Counter(words).items():
                p = self._term(term, create=True)
                assert p is not None
                p.pending_docs.append(doc)
                p.pending_tfs.append(tf)
        return range(start, len(self))

    def query_terms(self, text: str, limit: int | None = None) -> set[str]:
        """The query form of ``text`` for this index: its content words, or with ``limit`` and
        more distinct words than that, the ``limit`` with the highest idf here (ties by term;
        a word no document has is left out: it cannot score).

        A long text as the query (an agent's whole newest step) is what Lucene's MoreLikeThis
        bounds the same way (``maxQueryTerms``, 25 by default). It ranks a text's words by
        tf x idf; here BM25 scores the query as a set of words, so a word weighs its idf in
        every score it enters, and the rarest are the ones that move a ranking. The words
        every output repeats (paths, ``py``, ``self``) have postings over most pieces and a
        near-zero idf: kept, they would be most of a query's cost, which grows with the store.
        """
        last = self._last_query
        if last is not None and last[1] == limit and last[2] == len(self) and last[0] == text:
            return set(last[3])
        words = set(terms(text))
        if limit is not None and len(words) > limit:
            # by document counts read in place: a saved term's postings are not restored for
            # a word that may not be kept
            idf = {t: self._idf_of(df) for t in words if (df := self._df(t))}
            words = set(sorted(idf, key=lambda t: (-idf[t], t))[:limit])
        self._last_query = (text, limit, len(self), frozenset(words))
        return words

    def idf(self, term: str) -> float:
        return self._idf_of(self._df(term))

    def _idf_of(self, n: int) -> float:
        return math.log(1.0 + (len(self) - n + 0.5) / (n + 0.5))

    def _df(self, term: str) -> int:
        """The number of documents holding ``term``."""
        p = self._postings.get(term)
        if p is not None:
            return len(p)
        j = self._saved_vocab.get(term)
        if j is None or self._saved is None:
            return 0
        offsets = self._saved[0]
        return int(offsets[j + 1] - offsets[j])

    def _norm(self, lengths: np.ndarray) -> np.ndarray:
        n_docs = len(self)
        avgdl = self._total / n_docs if self._total else 1.0
        return self.k1 * (1.0 - self.b + self.b * lengths / avgdl)

    def _norm_all(self) -> np.ndarray:
        """Every document's length normalisation, kept until a document is added (a query
        with a new set of words reuses it instead of passing over all documents)."""
        lengths = self._length_array()
        key = (len(self), self._total)  # documents are only ever appended
        last = self._last_norm
        if last is not None and last[0] == key:
            return last[1]
        norm = self._norm(lengths)
        self._last_norm = (key, norm)
        return norm

    def scores(self, query: Iterable[str]) -> np.ndarray:
        """BM25 score of every document for a set of query terms (dense, float64, read-only:
        the same array comes back for the same terms until a document is added)."""
        n_docs = len(self)
        terms = frozenset(query)
        last = self._last_scores
        if last is not None and last[0] == terms and last[1] == n_docs:
            return last[2]
        out = np.zeros(n_docs, dtype=np.float64)
        if n_docs:
            postings = [(term, p.arrays()) for term in sorted(terms) if (p := self._term(term)) is not None]
            # Rare words (the usual query): the length norms of their documents only; the
            # norms of every document, kept until one is added, where the postings are many.
            norm_all = self._norm_all() if 2 * sum(len(d) for _, (d, _) in postings) > n_docs else None
            lengths = self._length_array()
            for term, (docs, tfs) in postings:
                norm = norm_all[docs] if norm_all is not None else self._norm(lengths[docs])
                out[docs] += self.idf(term) * tfs * (self.k1 + 1.0) / (tfs + norm)
        out.flags.writeable = False
        self._last_scores = (terms, n_docs, out)
        return out

    def scores_in(self, query: Iterable[str], ranges: Sequence[range]) -> np.ndarray:
        """BM25 scores (dense over all documents) filled only inside ``ranges``, the rest 0.

        The same values as :meth:`scores` there, at the cost of the postings that fall in
        the ranges (found by binary search), not of every posting of every query term.
        """
        n_docs = len(self)
        out = np.zeros(n_docs, dtype=np.float64)
        spans = sorted((r.start, r.stop) for r in ranges if len(r))
        if n_docs == 0 or not spans:
            return out
        starts = np.asarray([a for a, _ in spans], dtype=np.int64)
        stops = np.asarray([b for _, b in spans], dtype=np.int64)
        lengths = self._length_array()
        for term in sorted(set(query)):
            p = self._term(term)
            if p is None:
                continue
            docs_all, tfs_all = p.arrays()
            lo = np.searchsorted(docs_all, starts)
            hi = np.searchsorted(docs_all, stops)
            counts = hi - lo
            total = int(counts.sum())
            if total == 0:
                continue
            sel = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(total)
            docs, tfs = docs_all[sel], tfs_all[sel]
            out[docs] += self.idf(term) * tfs * (self.k1 + 1.0) / (tfs + self._norm(lengths[docs]))
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
