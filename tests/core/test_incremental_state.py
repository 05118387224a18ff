"""The per-call shortcuts equal the rules they stand for: the incremental timeline, BM25
scored inside candidate units, partial top-k selection."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import FlexAMem, FlexAMemConfig, Tuning
from flexamem_core.index.bm25 import BM25Index, content_words
from flexamem_core.index.namespace import top_k
from flexamem_core.recall.timeline import Timeline, TimelineLevels
from flexamem_tools.bench import synthetic_history

FAST = settings(deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def written(tokenizer, hashing_embedder) -> FlexAMem:
    mem = FlexAMem(FlexAMemConfig(tuning=Tuning(agent_unit_tokens=120)), tokenizer=tokenizer, embedder=hashing_embedder)
    mem.ingest(synthetic_history(60), namespace="t")
    return mem


@FAST
@given(data=st.data())
def test_incremental_timeline_equals_the_rule_from_scratch(written, data):
    index = written.state("t").index
    levels = TimelineLevels(index, written.writer, written.tokenizer, 4)
    for _ in range(5):  # one state, many calls: growing and shrinking histories, any target
        n = data.draw(st.integers(0, len(index.notes)))
        target = data.draw(st.one_of(st.integers(0, 40_000), st.sampled_from([0, 1, 50, 300])))
        notes = index.notes[:n]
        scratch = Timeline(notes, index, written.writer, written.tokenizer, 4)
        scratch.merge_down_to(target)
        fast = levels.build(notes, target)
        assert [(i.start, i.end, i.level, i.line) for i in fast.items] == \
            [(i.start, i.end, i.level, i.line) for i in scratch.items]
        assert fast.total == scratch.total == sum(i.tokens for i in fast.items)
        for pos in range(n):
            item = fast.item_at(pos)
            assert item is not None and item.start <= pos < item.end


@FAST
@given(docs=st.lists(st.text(alphabet="abc de\n1", max_size=40), min_size=1, max_size=60),
       query=st.text(alphabet="abc de1", max_size=20), data=st.data())
def test_scores_inside_ranges_equal_the_dense_scores(docs, query, data):
    index = BM25Index()
    index.add(docs[: len(docs) // 2])
    index.scores(content_words(query))  # a read between two additions
    index.add(docs[len(docs) // 2:])
    dense = index.scores(content_words(query))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(docs)), min_size=2, max_size=8)))
    ranges = [range(a, b) for a, b in zip(cuts[::2], cuts[1::2])]
    inside = index.scores_in(content_words(query), ranges)
    mask = np.zeros(len(docs), dtype=bool)
    for r in ranges:
        mask[r.start:r.stop] = True
    assert np.array_equal(inside[mask], dense[mask]) and not inside[~mask].any()
    # what a query keeps for the next (the length normalisation) gives what a fresh index gives
    fresh = BM25Index()
    fresh.add(docs)
    for words in (content_words(query + " de"), content_words(query)):
        assert np.array_equal(index.scores(words), fresh.scores(words))


@FAST
@given(values=st.lists(st.sampled_from([0.0, 0.5, 1.0, -1.0, 0.25]), max_size=50), k=st.integers(0, 60))
def test_top_k_is_the_head_of_the_full_sort(values, k):
    arr = np.asarray(values, dtype=np.float64)
    full = np.lexsort((np.arange(len(arr)), -arr))[:k]
    assert top_k(arr, k).tolist() == full.tolist()


class _LengtheningMerges:
    """A user's merge writer whose merges of some groups are longer than the lines they
    replace: the tokens saved by merging the oldest groups then fall as well as rise."""

    name = "lengthening-test-writer"

    def __init__(self, writer) -> None:
        self._writer = writer

    def write(self, unit):
        return self._writer.write(unit)

    def merge(self, texts):
        if sum(len(t) for t in texts) % 3 == 0:
            return " / ".join([*texts, *texts]), 0  # longer than the lines it replaces
        return texts[0][:20], 0


@FAST
@given(data=st.data())
def test_incremental_timeline_equals_the_rule_when_merges_lengthen_lines(written, data):
    """The first fit is a binary search over the most tokens saved so far: with merges that
    save less than nothing it still finds the first groups whose merge fits, as the walk does."""
    index = written.state("t").index
    writer = _LengtheningMerges(written.writer)
    levels = TimelineLevels(index, writer, written.tokenizer, 4)
    levels.build(index.notes, 0)  # every merge made: the case this test is for occurs
    assert any(b < a for s in levels.saved for a, b in zip(s, s[1:]))
    whole = levels.build(index.notes, 10**9).total
    for target in range(0, whole + 1, max(1, whole // 300)):  # every first fit of the full history
        scratch = Timeline(index.notes, index, writer, written.tokenizer, 4)
        scratch.merge_down_to(target)
        assert [i.line for i in levels.build(index.notes, target).items] == [i.line for i in scratch.items]
    for _ in range(6):
        n = data.draw(st.integers(0, len(index.notes)))
        target = data.draw(st.one_of(st.integers(0, 20_000), st.sampled_from([0, 1, 50, 300])))
        notes = index.notes[:n]
        scratch = Timeline(notes, index, writer, written.tokenizer, 4)
        scratch.merge_down_to(target)
        fast = levels.build(notes, target)
        assert [(i.start, i.end, i.level, i.line) for i in fast.items] == \
            [(i.start, i.end, i.level, i.line) for i in scratch.items]
        assert fast.total == scratch.total
