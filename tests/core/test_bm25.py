"""The incremental BM25 index against rank-bm25 (with Lucene IDF) as the oracle."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from flexamem_core.index.bm25 import BM25Index, content_words, stop_words, terms

PROPS = settings(deadline=None, max_examples=150, suppress_health_check=list(HealthCheck))

VOCAB = ["parser", "date", "error", "alice", "paris", "42", "config", "yaml", "the", "and", "x",
         "src/app.py", "<b>", "</b>", "user_id", "ValueError", "7", "über", "日本"]
doc = st.lists(st.sampled_from(VOCAB), min_size=0, max_size=30).map(" ".join)
corpus = st.lists(doc, min_size=1, max_size=40)


def oracle(docs: list[str], k1: float, b: float) -> BM25Okapi:
    """rank-bm25 over the same terms, its epsilon-floored IDF replaced by Lucene's."""
    tokenized = [terms(d) for d in docs]
    model = BM25Okapi(tokenized, k1=k1, b=b)
    n_docs = len(tokenized)
    df: dict[str, int] = {}
    for toks in tokenized:
        for t in set(toks):
            df[t] = df.get(t, 0) + 1
    model.idf = {t: math.log(1 + (n_docs - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    return model


@PROPS
@given(docs=corpus, query=doc, k1=st.sampled_from([1.2, 0.9, 2.0]), b=st.sampled_from([0.75, 0.0, 1.0]))
def test_scores_equal_the_oracle(docs, query, k1, b):
    assume(any(terms(d) for d in docs))  # rank-bm25 divides by zero on an all-empty corpus
    index = BM25Index(k1, b)
    index.add(docs)
    q = content_words(query)
    # rank-bm25 gives 0/0 = nan for an empty document when b = 1; it holds no query term.
    expected = np.nan_to_num(oracle(docs, k1, b).get_scores(sorted(q)), nan=0.0)
    np.testing.assert_allclose(index.scores(q), expected, rtol=0, atol=1e-9)


@PROPS
@given(docs=corpus, query=doc, cuts=st.lists(st.integers(0, 40), max_size=5))
def test_incremental_adds_score_like_a_fresh_index(docs, query, cuts):
    q = content_words(query)
    grown = BM25Index()
    bounds = sorted({0, len(docs), *(min(c, len(docs)) for c in cuts)})
    for lo, hi in zip(bounds, bounds[1:]):
        assert list(grown.add(docs[lo:hi])) == list(range(lo, hi))
        grown.scores(q)  # query between appends: cached arrays must follow the growth
    fresh = BM25Index()
    fresh.add(docs)
    assert len(grown) == len(fresh) == len(docs)
    np.testing.assert_allclose(grown.scores(q), fresh.scores(q), rtol=0, atol=1e-12)
    assert grown.search(query) == fresh.search(query)


def test_lucene_idf_keeps_common_words_below_rare_ones():
    index = BM25Index()
    index.add(["common"] * 9 + ["common rare"])
    assert index.idf("rare") > index.idf("common") > 0
    assert index.idf("absent") == pytest.approx(math.log(1 + 10.5 / 0.5))


def test_stop_words_and_markup_are_removed():
    assert "the" in stop_words()
    words = terms("The <output>Parser</output> and ```python\nraised a ValueError &amp; user_id 7 x")
    assert words == ["parser", "raised", "valueerror", "user_id", "7"]
    assert content_words("the THE the") == set()
    assert content_words("When was Alice moving to Paris?") == {"alice", "moving", "paris"}


def test_query_words_match_only_content():
    index = BM25Index()
    index.add(["<returncode>1</returncode> the parser failed", "the and of a an", "returncode"])
    hits = index.search("the returncode of the parser")
    assert [d for d, _ in hits] == [2, 0]  # markup tags are not words; stop words never match
    assert index.search("the and of") == []


def test_ties_go_to_the_earlier_document():
    index = BM25Index()
    index.add(["alpha beta", "gamma", "alpha beta", "alpha beta"])
    hits = index.search("alpha")
    assert [d for d, _ in hits] == [0, 2, 3]
    assert len({s for _, s in hits}) == 1
    assert index.search("alpha", top=2) == hits[:2]


def test_empty_index_and_empty_query():
    index = BM25Index()
    assert index.search("anything") == []
    assert index.scores({"x"}).shape == (0,)
    index.add(["", "word"])
    assert index.search("") == []
    assert index.scores(set()).tolist() == [0.0, 0.0]


def test_stop_words_are_scikit_learns_read_without_importing_it():
    """The list is scikit-learn's, read from its module file: a process whose embedder does
    not load scikit-learn (an API embedder) does not pay its import (1.5-2 s) on a first render."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    assert stop_words() == ENGLISH_STOP_WORDS
    probe = ("import sys; from flexamem_core.index.bm25 import terms; "
             "assert terms('the parser of the config') == ['parser', 'config']; "
             "assert 'sklearn' not in sys.modules, 'scikit-learn was imported'")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@PROPS
@given(docs=corpus, query=st.lists(st.sampled_from(VOCAB), min_size=0, max_size=60).map(" ".join),
       limit=st.integers(1, 8))
def test_a_long_query_keeps_its_terms_with_the_highest_tf_idf(docs, query, limit):
    """``query_terms``: all content words when they are few; else the ``limit`` indexed terms
    with the highest idf, ties by term; a term no document has never."""
    index = BM25Index()
    index.add(docs)
    assert index.query_terms(query) == content_words(query)
    kept = index.query_terms(query, limit)
    words = terms(query)
    if len(set(words)) <= limit:
        assert kept == set(words)
        return
    df = {t: sum(t in set(terms(d)) for d in docs) for t in set(words)}
    idf = {t: math.log(1 + (len(docs) - n + 0.5) / (n + 0.5)) for t, n in df.items() if n}
    expected = sorted(idf, key=lambda t: (-idf[t], t))[:limit]
    assert kept == set(expected)
    assert len(kept) == min(limit, len(idf))


def test_a_long_query_keeps_the_rare_identifier_and_drops_the_words_every_piece_has():
    index = BM25Index()
    index.add([f"src/app.py line {i} value {i % 7}" for i in range(200)] + ["src/app.py ALPHA_TOKEN zebra-42"])
    step = " ".join(f"src/app.py line value {i % 7}" for i in range(50)) + " ALPHA_TOKEN zebra 42"
    kept = index.query_terms(step, 3)
    assert {"alpha_token", "zebra"} <= kept and not {"src", "app", "py"} & kept
    top = index.search(" ".join(kept), top=1)
    assert top and top[0][0] == 200


@PROPS
@given(docs=corpus, more=st.lists(doc, max_size=10), query=doc)
def test_a_restored_index_scores_and_grows_like_the_one_it_saved(docs, more, query):
    """``export`` then ``restore`` (a reopen): the same scores, document counts and query
    form, before and after more documents are added to both (postings read in place, then
    grown), and the same export again."""
    saved = BM25Index()
    saved.add(docs)
    restored = BM25Index.restore(saved.export())
    words = content_words(query) | {"unknown_word"}
    # read first (the restored postings are read in place), then grown, then read again
    np.testing.assert_array_equal(restored.scores(words), saved.scores(words))
    for index in (saved, restored):
        index.add(more)
    np.testing.assert_array_equal(restored.scores(words), saved.scores(words))
    assert [restored.idf(w) for w in sorted(words)] == [saved.idf(w) for w in sorted(words)]
    assert restored.query_terms(query, 2) == saved.query_terms(query, 2)
    again, first = restored.export(), saved.export()
    assert again.keys() == first.keys() and all(np.array_equal(again[k], first[k]) for k in first)

