"""A reopened store renders from the saved index exactly as from one rebuilt from its pieces,
and matches the stored chain without decoding unit bodies."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from flexamem_core import FlexAMem, FlexAMemConfig, Tuning
from flexamem_core.index.bm25 import content_words
from flexamem_core.index.namespace import MERGED_POINT_READS, NamespaceIndex
from flexamem_core.stores import InMemoryStore
from flexamem_core.stores.sqlite import SQLiteStore
from flexamem_tools.bench import synthetic_history

QUERIES = ["pytest failure in the parser", "config file path", "traceback error line", "zzz-none"]


class CountingStore(InMemoryStore):
    """The in-memory store, counting unit bodies read (to see what a reopen decodes)."""

    def __init__(self) -> None:
        super().__init__()
        self.units_read = 0

    def get_unit(self, namespace, key):
        self.units_read += 1
        return super().get_unit(namespace, key)


def _memory(store, tokenizer, embedder, **settings) -> FlexAMem:
    return FlexAMem(FlexAMemConfig(**settings, tuning=Tuning(agent_unit_tokens=120)), store=store, tokenizer=tokenizer,
                    embedder=embedder)


def _same_index(a: NamespaceIndex, b: NamespaceIndex) -> None:
    assert [n.unit_key for n in a.notes] == [n.unit_key for n in b.notes]
    assert a.unit_docs == b.unit_docs and a.doc_unit == b.doc_unit and a.doc_piece == b.doc_piece
    np.testing.assert_array_equal(a.doc_tokens_array(), b.doc_tokens_array())
    np.testing.assert_array_equal(a.doc_note_array(), b.doc_note_array())
    np.testing.assert_array_equal(a.vectors, b.vectors)
    np.testing.assert_array_equal(a.piece_vectors, b.piece_vectors)  # one float32 row per piece
    assert a.piece_vectors.dtype == np.float32 and len(a.piece_vectors) == len(a.doc_unit)
    assert a.own_piece_vectors == b.own_piece_vectors
    assert a.back_links == b.back_links
    for q in QUERIES:
        np.testing.assert_array_equal(a.bm25.scores(content_words(q)), b.bm25.scores(content_words(q)))
        ranges = list(a.unit_docs.values())[::3]
        np.testing.assert_array_equal(a.bm25.scores_in(content_words(q), ranges),
                                      b.bm25.scores_in(content_words(q), ranges))


def test_snapshot_restores_the_index_built_from_pieces(tokenizer, hashing_embedder):
    store = InMemoryStore()
    history = synthetic_history(80)
    mem = _memory(store, tokenizer, hashing_embedder)
    mem.ingest(history[:300], namespace="t")
    index = mem.state("t").index
    assert store.get_index_snapshot("t") is not None  # saved while writing
    index.save()
    restored = NamespaceIndex(store, "t")
    assert restored.saved_covers == len(index.notes) > 0
    _same_index(restored, index)
    # Units written after the snapshot are indexed from their pieces on top of it.
    mem.ingest(history, namespace="t")
    grown = NamespaceIndex(store, "t")
    assert 0 < grown.saved_covers <= len(grown.notes)
    store_without = InMemoryStore()
    _memory(store_without, tokenizer, hashing_embedder).ingest(history, namespace="t")
    store_without.put_index_snapshot("t", b"not an npz file")  # ignored, rebuilt from pieces
    rebuilt = NamespaceIndex(store_without, "t")
    assert rebuilt.saved_covers == 0
    _same_index(grown, rebuilt)


def test_a_snapshot_that_does_not_fit_the_notes_is_ignored(tokenizer, hashing_embedder):
    a, b = InMemoryStore(), InMemoryStore()
    _memory(a, tokenizer, hashing_embedder).ingest(synthetic_history(40), namespace="t")
    _memory(b, tokenizer, hashing_embedder).ingest(synthetic_history(40)[::-1][:60], namespace="t")
    b.put_index_snapshot("t", a.get_index_snapshot("t"))  # another history's index
    index = NamespaceIndex(b, "t")
    assert index.saved_covers == 0
    assert len(index.bm25) == sum(len(r) for r in index.unit_docs.values())


def test_reopen_renders_byte_identically_and_reads_only_the_units_it_shows(tokenizer, hashing_embedder):
    history = synthetic_history(120)
    store = CountingStore()
    # The paper's render on every call: the state (chain, timeline, index) decides the output.
    live = _memory(store, tokenizer, hashing_embedder, budget=3000, cache_stable=False)
    calls = []
    for end in range(40, len(history), 37):  # a run rendering as it goes
        calls.append(live.render(history[:end], namespace="t"))
    final_live = live.render(history, namespace="t", budget=2500)
    store.units_read = 0
    reopened = _memory(store, tokenizer, hashing_embedder, budget=3000, cache_stable=False)
    final_reopened = reopened.render(history, namespace="t", budget=2500)
    assert [m.to_dict() for m in final_reopened.messages] == [m.to_dict() for m in final_live.messages]
    reopened_items = reopened.state("t").index.timeline_items.values()
    assert reopened_items and all(i.tokens == tokenizer.count(i.line) + 1 for i in reopened_items)
    n_units = len(reopened.state("t").units)
    assert n_units > 50
    assert store.units_read <= 12, "a reopen decodes only the units the render reads"
    # The same again with no snapshot at all: the index is rebuilt from the pieces.
    store.put_index_snapshot("t", b"")
    fresh = _memory(store, tokenizer, hashing_embedder, budget=3000, cache_stable=False)
    fresh.state("t")
    assert store.get_index_snapshot("t") not in (None, b"")  # rebuilt from the pieces, then saved
    assert [m.to_dict() for m in fresh.render(history, namespace="t", budget=2500).messages] == \
        [m.to_dict() for m in final_live.messages]


class MergedCountingStore(InMemoryStore):
    """The in-memory store, counting merged records read one by one and listed."""

    def __init__(self) -> None:
        super().__init__()
        self.merged_read = self.merged_listed = 0

    def get_merged(self, namespace, key):
        self.merged_read += 1
        return super().get_merged(namespace, key)

    def merged_records(self, namespace):
        self.merged_listed += 1
        return super().merged_records(namespace)


def _memory_lines(rendered) -> int:
    memory = next(m.content for m in rendered.messages if isinstance(m.content, str) and "(merged)" in m.content)
    return memory.count("\n- ")


@pytest.mark.parametrize("counts", ["snapshot", "merged records", "none"])
def test_a_reopened_timeline_builds_only_the_lines_it_shows(tokenizer, hashing_embedder, counts):
    """A reopen counts the timeline lines it does not show and builds (and reads the records
    of) only those it shows, rendering call by call byte-identically to the instance that
    built every line. The counts come from the snapshot when it was saved after the renders
    that merged (``counts="snapshot"``), else from the merged records, listed once (a
    history written whole, then rendered). Records that carry no count make the reopen build
    every merged line again, from that one listing."""
    history = synthetic_history(400)
    store = MergedCountingStore()
    live = _memory(store, tokenizer, hashing_embedder, budget=3000, cache_stable=False)
    if counts != "snapshot":
        live.ingest(history[:1500], namespace="t")  # the snapshot is saved before any merge
    for end in range(300, 1501, 300):
        live.render(history[:end], namespace="t")
    live_index = live.state("t").index
    if counts == "snapshot":
        live._namespaces.save_index(live_index)
    if counts == "none":
        space = store._spaces["t"]
        space.merged = {k: dataclasses.replace(m, line_tokens=0, line_counter="") for k, m in space.merged.items()}
    merges = sum(1 for key in live_index.timeline_items if len(key) == 4)
    assert merges > 60
    store.merged_read = store.merged_listed = 0
    reopened = _memory(store, tokenizer, hashing_embedder, budget=3000, cache_stable=False)
    first = reopened.render(history[:1500], namespace="t")
    assert [m.to_dict() for m in first.messages] == \
        [m.to_dict() for m in live.render(history[:1500], namespace="t").messages]
    reopened_index = reopened.state("t").index
    built = {**reopened_index.timeline_items, **reopened_index.unaligned_items}
    if counts == "none":
        assert len(built) > merges
        assert store.merged_listed == 1 and store.merged_read == 0  # every record from the one listing
    else:
        assert len(built) <= _memory_lines(first) + 8  # the lines shown (and a few merged unaligned)
        assert store.merged_listed == (counts == "merged records")
        assert store.merged_read <= len(built)  # at most a read per merged line built
    for end in range(1500, len(history), 97):  # both go on growing: the same requests
        assert [m.to_dict() for m in reopened.render(history[:end], namespace="t").messages] == \
            [m.to_dict() for m in live.render(history[:end], namespace="t").messages]
    # a snapshot saved now keeps the counts of the lines the reopen never built
    reopened._namespaces.save_index(reopened.state("t").index)
    lines = set(zip(*_saved_line_spans(store.get_index_snapshot("t"))))
    assert {(k[0], k[1]) for k in live_index.timeline_items} <= lines


def test_merged_records_are_read_one_by_one_then_listed_once(tokenizer, hashing_embedder):
    store = MergedCountingStore()
    mem = _memory(store, tokenizer, hashing_embedder, budget=2000, cache_stable=False)
    mem.render(synthetic_history(120), namespace="t")
    stored = store.merged_records("t")
    assert stored
    store.merged_read = store.merged_listed = 0
    index = NamespaceIndex(store, "t")
    assert [index.get_merged(f"missing {i}") for i in range(MERGED_POINT_READS)] == [None] * MERGED_POINT_READS
    assert (store.merged_read, store.merged_listed) == (MERGED_POINT_READS, 0)
    assert index.get_merged(stored[0].key) == stored[0]  # the next read lists them all
    assert store.merged_listed == 1
    assert [index.get_merged(m.key) for m in stored] == stored
    assert index.get_merged("missing again") is None  # one read: written since?
    assert (store.merged_read, store.merged_listed) == (MERGED_POINT_READS + 1, 1)


def _saved_line_spans(data: bytes) -> tuple:
    from flexamem_core.index import snapshot as index_snapshot

    arrays = index_snapshot.read(data)
    return arrays["line_starts"].tolist(), arrays["line_ends"].tolist()


def test_sqlite_reopen_uses_the_snapshot_and_forget_deletes_it(tmp_path, tokenizer, hashing_embedder):
    path = tmp_path / "m.db"
    history = synthetic_history(70)
    with SQLiteStore(path) as store:
        mem = _memory(store, tokenizer, hashing_embedder)
        first = mem.render(history, namespace="t", budget=2000)
        key = mem.state("t").units[3].key
    with SQLiteStore(path) as store:
        again = _memory(store, tokenizer, hashing_embedder)
        assert again.state("t").index.saved_covers > 0
        assert again.render(history, namespace="t", budget=2000).messages == first.messages
        assert again.forget("t", key) == 1
        assert store.get_index_snapshot("t") is None
        after = _memory(store, tokenizer, hashing_embedder)
        assert key not in after.state("t").index.position


def test_notes_without_a_message_count_still_match_the_chain(tokenizer, hashing_embedder):
    """Notes written before ``Note.messages`` existed (0) are matched by reading the unit."""
    import dataclasses

    history = synthetic_history(30)
    store = InMemoryStore()
    mem = _memory(store, tokenizer, hashing_embedder)
    expected = mem.render(history, namespace="t", budget=1500).messages
    space = store._spaces["t"]
    space.notes = {k: dataclasses.replace(n, messages=0) for k, n in space.notes.items()}
    space.index_snapshot = None
    old = _memory(store, tokenizer, hashing_embedder)
    assert old.render(history, namespace="t", budget=1500).messages == expected
    assert old.ingest(history, namespace="t") == 0  # nothing written twice


def test_a_reopened_chain_notices_an_edit_and_forks(tokenizer, hashing_embedder):
    import dataclasses

    history = synthetic_history(30)
    store = InMemoryStore()
    _memory(store, tokenizer, hashing_embedder).ingest(history, namespace="t")
    assert _memory(store, tokenizer, hashing_embedder).ingest(history, namespace="t") == 0
    k = next(i for i, m in enumerate(history) if i > len(history) // 2 and m.role == "tool")
    edited = [*history[:k], dataclasses.replace(history[k], content=history[k].content + " EDITED"),
              *history[k + 1:]]
    reopened = _memory(store, tokenizer, hashing_embedder)
    assert reopened.ingest(edited, namespace="t") > 0  # the edited unit onward is a new branch
    chain = reopened.state("t").units
    assert any("EDITED" in m.content for u in chain for m in u.messages if isinstance(m.content, str))


def test_the_quick_digest_is_unambiguous():
    from flexamem_core.model.messages import Message
    from flexamem_core.write.units import messages_digest

    a = [Message(role="tool", content="ab", tool_call_id="c", name=None)]
    b = [Message(role="tool", content="a", tool_call_id="c", name="b")]
    c = [Message(role="tool", content="a"), Message(role="tool", content="b")]
    d = [Message(role="tool", content="ab", tool_call_id="c", name=None, id="x")]
    digests = {messages_digest(x, "agent") for x in (a, b, c, d)} | {messages_digest(a, "reader")}
    assert len(digests) == 5


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_instances_sharing_a_store_see_each_others_writes_and_forget(tmp_path, tokenizer, hashing_embedder, kind):
    """Issue 11, finding 6: a second instance on the same store raised KeyError after the
    first forgot the namespace; it also never saw the other's new units."""
    store = SQLiteStore(tmp_path / "shared.db") if kind == "sqlite" else InMemoryStore()
    history = synthetic_history(40)
    a, b = (_memory(store, tokenizer, hashing_embedder, budget=1500) for _ in range(2))
    a.ingest(history[:60], namespace="t")
    a.render_question("what failed?", namespace="t")
    b.ingest(history, namespace="t")  # b writes units a has not seen
    seen = {n.unit_key for n in a.state("t").index.notes}
    assert {n.unit_key for n in store.notes("t")} <= seen
    assert b.forget("t") > 0
    assert a.render_question("what failed?", namespace="t").messages[-1].content == "what failed?"
    assert a.state("t").index.notes == []
    assert a.ingest(history[:60], namespace="t") > 0  # written again, no KeyError
    assert a.render(history[:80], namespace="t").tokens <= 1500
