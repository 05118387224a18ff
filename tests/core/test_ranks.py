"""``fusion.ranks`` sorts unique 64-bit keys instead of running numpy's stable sort: checked
against the definition (a stable argsort of the negated values) on values full of ties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from flexamem_core import Tuning
from flexamem_core.index.fusion import ranks

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -1e-45]


def _definition(values: np.ndarray) -> np.ndarray:
    order = np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")
    out = np.empty(len(order), dtype=np.float64)
    out[order] = np.arange(1, len(order) + 1, dtype=np.float64)
    return out


@settings(max_examples=300, deadline=None)
@given(arrays(st.sampled_from([np.float32, np.float64]), st.integers(0, 300),
              elements=st.one_of(st.sampled_from(SPECIAL), st.floats(-10, 10, width=32))))
def test_ranks_are_the_stable_order_of_the_values(values):
    np.testing.assert_array_equal(ranks(values), _definition(values))


@given(arrays(np.float64, st.integers(1, 50), elements=st.one_of(st.just(np.nan), st.floats(-5, 5))))
def test_ranks_with_nan_keep_the_definition(values):
    np.testing.assert_array_equal(ranks(values), _definition(values))


def test_ranks_of_many_cosines_with_ties():
    rng = np.random.default_rng(3)
    cos = rng.standard_normal(200_000).astype(np.float32)
    cos[::5] = cos[1]  # a fifth tied
    np.testing.assert_array_equal(ranks(cos), _definition(cos))
    np.testing.assert_array_equal(ranks(cos.astype(np.float64) * 7), _definition(cos.astype(np.float64) * 7))


@pytest.fixture(scope="module")
def indexes(hashing_embedder, tokenizer):
    """An agent index (pieces take their note's vector) and a reader index (pieces embedded)."""
    from flexamem_core import FlexAMem, FlexAMemConfig
    from flexamem_tools.bench import synthetic_history

    agent = FlexAMem(FlexAMemConfig(tuning=Tuning(agent_unit_tokens=300)), tokenizer=tokenizer,
                     embedder=hashing_embedder)
    agent.ingest(synthetic_history(60), final=True)
    reader = FlexAMem(FlexAMemConfig(history="reader", piece_vectors=True, tuning=Tuning(reader_unit_tokens=300)),
                      tokenizer=tokenizer, embedder=hashing_embedder)
    turns = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"turn {i}: the {['garden', 'kettle', 'invoice'][i % 3]} again, line {i % 4}"}
             for i in range(300)]
    reader.ingest(turns, final=True)
    return [agent.state("default").index, reader.state("default").index]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 1), seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(["prefix", "subset", "shuffled"]))
def test_piece_cosine_ranks_are_the_ranks_of_the_piece_cosines(indexes, hashing_embedder, which, seed, kind):
    """The note-ranked shortcut, the kept ranking and the plain one all give ``ranks`` of the
    cosines: any query, the old units' prefix, a subset, docs in any order; asked twice,
    the same array (kept), and a new query is ranked afresh."""
    index = indexes[which]
    rng = np.random.default_rng(seed)
    n = len(index.doc_unit)
    q = hashing_embedder.embed([f"garden invoice config value {seed % 97}"])[0]
    if rng.random() < 0.3:
        q = -q  # another order
    if kind == "prefix":
        docs = np.arange(int(rng.integers(1, n + 1)))
    elif kind == "subset":
        docs = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
    else:
        docs = rng.permutation(n)[: int(rng.integers(1, n + 1))]
    got = index.piece_cosine_ranks(docs, q)
    np.testing.assert_array_equal(got, _definition(index.piece_cosines(docs, q)))
    assert index.piece_cosine_ranks(docs.copy(), q) is got or 8 * len(docs) <= n


def test_the_agent_index_ranks_by_notes(indexes):
    assert indexes[0].own_piece_vectors == 0 and indexes[1].own_piece_vectors == len(indexes[1].doc_unit)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 1), seed=st.integers(0, 2**32 - 1), n_old=st.integers(1, 60),
       weight=st.sampled_from([0.0, 0.3, 0.5, 1.0]))
def test_each_units_best_piece_is_the_best_of_the_dense_fusion(indexes, hashing_embedder, which, seed, n_old,
                                                                weight):
    """Seeds rank units by their best fused piece. Where pieces are ranked by their notes
    (agents), only each unit's first piece and its lexical matches are scored: the result is
    the maximum of the dense fusion of every piece, unit by unit, to the bit."""
    from flexamem_core import FlexAMemConfig, Tuning
    from flexamem_core.index.bm25 import terms
    from flexamem_core.index.fusion import fuse
    from flexamem_core.recall.candidates import _best_piece_scores

    index = indexes[which]
    notes = index.notes[: min(n_old, len(index.notes))]
    rng = np.random.default_rng(seed)
    words = sorted({w for p in range(3) for w in terms(f"garden kettle invoice value config parser error {seed}")})
    query = " ".join(rng.permutation(words)[: int(rng.integers(1, len(words) + 1))])
    q = hashing_embedder.embed([query])[0]
    cfg = FlexAMemConfig(tuning=Tuning(fusion_weight=weight))
    got = _best_piece_scores(notes, np.arange(len(notes)), index, query, q, cfg)
    docs = np.arange(index.unit_docs[notes[-1].unit_key].stop)
    bm25 = index.bm25.scores(index.bm25.query_terms(query, cfg.tuning.query_terms))[docs]
    dense = fuse(bm25, index.piece_cosines(docs, q), cfg)
    owner = index.doc_note_array()[docs]
    expected = np.array([dense[owner == u].max() if (owner == u).any() else -np.inf for u in range(len(notes))])
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n_old=st.integers(10, 60), k=st.integers(1, 400),
       weight=st.sampled_from([0.0, 0.3, 0.5, 1.0]), n_out=st.integers(0, 30))
def test_the_note_ranking_orders_as_the_dense_fusion(indexes, hashing_embedder, seed, n_old, k, weight, n_out):
    """The walk reads the k best old pieces from the notes' ranking (the matching pieces and
    the k best-ranked others): the same documents, ties and scores as ``best_first`` over the
    dense fusion of every piece, also after leaving some documents out."""
    from flexamem_core import FlexAMemConfig
    from flexamem_core.index.bm25 import terms
    from flexamem_core.index.fusion import DenseRanking, NoteRanking, fused_over, fused_ranking

    index = indexes[0]  # agents: pieces ranked by their notes
    rng = np.random.default_rng(seed)
    words = sorted(set(terms(f"garden kettle invoice value config parser error src py {seed}")))
    query = " ".join(rng.permutation(words)[: int(rng.integers(1, len(words) + 1))])
    q = hashing_embedder.embed([query])[0] * (1 if rng.random() < 0.7 else -1)
    cfg = FlexAMemConfig(tuning=Tuning(fusion_weight=weight))
    notes = index.notes[: min(n_old, len(index.notes))]
    docs = np.arange(index.unit_docs[notes[-1].unit_key].stop)
    bm25 = index.bm25.scores(index.bm25.query_terms(query, cfg.tuning.query_terms))
    sparse = fused_ranking(docs, bm25, q, index, cfg)
    if 8 * len(docs) <= len(index.doc_unit) or weight == 0:
        assert isinstance(sparse, DenseRanking)
        return
    assert isinstance(sparse, NoteRanking)
    dense = DenseRanking(docs, fused_over(docs, bm25, q, index, cfg, len(bm25)))
    out = rng.choice(len(docs), size=min(n_out, len(docs)), replace=False).tolist()
    for a, b in ((sparse, dense), (sparse.without(out), dense.without(out))):
        assert len(a) == len(b)
        best = a.best(k)
        np.testing.assert_array_equal(best, b.best(k))
        assert best.dtype == np.int64
        np.testing.assert_array_equal(a.score(best), b.score(best))
        np.testing.assert_array_equal(a.score(docs), dense.scores[docs])


@settings(max_examples=200, deadline=None)
@given(base=st.floats(-1e6, 1e6, allow_nan=False), steps=st.lists(st.integers(-3, 3), min_size=1, max_size=40),
       extra=st.lists(st.sampled_from([*SPECIAL, 1e300, -1e300, 5e-324]), max_size=5))
def test_float64_values_closer_than_float32_keep_the_definition(base, steps, extra):
    """float64 values are ordered by their float32 roundings first: values a few ulps apart
    (one float32), out of the float32 range or below its smallest, still rank exactly."""
    values = np.asarray([base + s * np.spacing(base) for s in steps] + extra, dtype=np.float64)
    np.testing.assert_array_equal(ranks(values), _definition(values))


def test_the_first_documents_rank_by_notes_after_a_reopen_and_more_writes(tokenizer, hashing_embedder):
    """The notes' runs of the first documents are kept as documents are added, and start over
    on an index read back from its snapshot: the ranks equal the definition before and after."""
    from flexamem_core import FlexAMem, FlexAMemConfig
    from flexamem_core.stores import InMemoryStore
    from flexamem_tools.bench import synthetic_history

    history = synthetic_history(80)
    store = InMemoryStore()
    first = FlexAMem(FlexAMemConfig(tuning=Tuning(agent_unit_tokens=300)), store=store, tokenizer=tokenizer,
                     embedder=hashing_embedder)
    first.ingest(history[:300], namespace="r")
    first.state("r").index.save()
    q = hashing_embedder.embed(["parser config value"])[0]
    for mem in (first, FlexAMem(FlexAMemConfig(tuning=Tuning(agent_unit_tokens=300)), store=store, tokenizer=tokenizer,
                                embedder=hashing_embedder)):
        index = mem.state("r").index
        assert mem is first or index.saved_covers > 0  # read back from the snapshot, then grown
        for grown in (0, 1):
            if grown:
                mem.ingest(history[: 300 + 40 * (mem is not first) + 60], namespace="r")
            n = len(index.doc_unit)
            for d in (n, n // 2 + 1, 1):
                docs = np.arange(d)
                got = index.piece_cosine_ranks(docs, q)
                np.testing.assert_array_equal(got, _definition(index.piece_cosines(docs, q)))
                groups = index.note_groups(docs, q)
                if groups is not None:
                    owner = index.doc_note_array()[docs]
                    np.testing.assert_array_equal(groups.starts, np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]))
