"""A reopen reads what it can in place and counts nothing it counted before: the snapshot's
arrays are aligned views of its bytes, the piece vectors are not copied, and every record
and merged line keeps its token count."""

from __future__ import annotations

import io

import numpy as np
import pytest

from flexamem_core import FlexAMem, FlexAMemConfig, Tuning
from flexamem_core.index import snapshot
from flexamem_core.index.namespace import _Rows
from flexamem_core.recall.timeline import merged_line
from flexamem_core.stores import InMemoryStore
from flexamem_tools.bench import synthetic_history

KEYS = ["a", "b", "c"]


def _arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"piece_vectors": rng.random((37, 384), dtype=np.float32), "small": np.arange(5, dtype=np.int32),
            "text": np.frombuffer(b"o200k\nrule", dtype=np.uint8), "empty": np.zeros((0, 3), dtype=np.int64),
            "scalar": np.int64(7), "wide": rng.random((3, 2))}


def test_snapshot_arrays_are_aligned_read_only_views_of_its_bytes():
    arrays = _arrays(np.random.default_rng(0))
    data = snapshot.encode(arrays, KEYS)
    got = snapshot.decode(data, KEYS)
    assert got is not None
    whole = np.frombuffer(data, dtype=np.uint8)
    for name, value in arrays.items():
        np.testing.assert_array_equal(got[name], value)
        assert got[name].shape == np.shape(value) and got[name].dtype == np.asarray(value).dtype
        assert got[name].flags.aligned and not got[name].flags.writeable
        if got[name].nbytes:
            assert np.shares_memory(got[name], whole), f"{name} was copied"
    with np.load(io.BytesIO(data), allow_pickle=False) as z:  # still an .npz numpy reads
        for name, value in arrays.items():
            np.testing.assert_array_equal(z[name], value)
    assert snapshot.encode(arrays, KEYS) == data  # deterministic bytes


def test_a_snapshot_written_by_np_savez_still_loads():
    arrays = _arrays(np.random.default_rng(1))
    buf = io.BytesIO()
    np.savez(buf, format=np.int64(snapshot.FORMAT), covers=np.int64(len(KEYS)), keys=snapshot.keys_digest(KEYS),
             **arrays)
    got = snapshot.decode(buf.getvalue(), KEYS)
    assert got is not None
    for name, value in arrays.items():
        np.testing.assert_array_equal(got[name], value)
        assert got[name].flags.aligned  # a misaligned member is copied, so BLAS can use it


@pytest.mark.parametrize("damage", [b"", b"PK\x03\x04 not a zip", "truncate", "compressed"])
def test_a_damaged_snapshot_is_ignored(damage):
    arrays = _arrays(np.random.default_rng(2))
    if damage == "truncate":
        data = snapshot.encode(arrays, KEYS)[:-200]
    elif damage == "compressed":
        buf = io.BytesIO()
        np.savez_compressed(buf, format=np.int64(snapshot.FORMAT), covers=np.int64(3),
                            keys=snapshot.keys_digest(KEYS), **arrays)
        data = buf.getvalue()
    else:
        data = damage
    assert snapshot.decode(data, KEYS) is None


@pytest.mark.parametrize(("base", "grown"), [(0, 0), (0, 5), (9, 0), (9, 5), (9, 200)])
def test_rows_kept_in_place_and_grown_act_as_one_matrix(base, grown):
    rng = np.random.default_rng(base * 1000 + grown)
    first, more = rng.random((base, 8), dtype=np.float32), rng.random((grown, 8), dtype=np.float32)
    frozen = first.copy()
    frozen.setflags(write=False)
    rows = _Rows.of(frozen) if base else _Rows(8)
    for chunk in np.array_split(more, 3) if grown else []:
        rows.extend(chunk)
    whole = np.vstack([first, more])
    q = rng.random(8, dtype=np.float32)
    assert len(rows) == len(whole)
    np.testing.assert_allclose(rows.dot(q), whole @ q, rtol=1e-6)
    picks = rng.integers(0, max(1, len(whole)), size=17) if len(whole) else np.zeros(0, dtype=np.int64)
    np.testing.assert_array_equal(rows.take(picks), whole[picks])
    np.testing.assert_array_equal(rows.view, whole)  # joined once, then grown as one buffer
    rows.extend(more[:2])
    np.testing.assert_array_equal(rows.view, np.vstack([whole, more[:2]]))
    np.testing.assert_array_equal(frozen, first)  # the kept rows were never written


def test_a_store_filled_by_ingest_alone_reopens_with_every_line_counted(tokenizer, hashing_embedder):
    """Bulk ingest (no render) saves the record line counts with the snapshot, and a merged
    record stores its line's count: a reopened timeline tokenizes neither again."""
    store = InMemoryStore()
    history = synthetic_history(300)
    cfg = FlexAMemConfig(budget=2500, cache_stable=False, tuning=Tuning(agent_unit_tokens=120))
    FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder).ingest(history, namespace="t")
    reopened = FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder)
    index = reopened.state("t").index
    assert index.saved_covers > 200
    saved = [index.saved_line_tokens(p, p + 1, "", tokenizer.name) for p in range(index.saved_covers)]
    lines = [i.line for i in sorted((v for k, v in index.timeline_items.items() if len(k) == 3),
                                    key=lambda i: i.start)]
    assert not lines  # nothing built yet: the counts come from the snapshot
    first = reopened.render(history, namespace="t")
    records = {i.start: i for k, i in index.timeline_items.items() if len(k) == 3}
    assert all(saved[p] == records[p].tokens == tokenizer.count(records[p].line) + 1
               for p in range(index.saved_covers) if p in records)
    merged = store.merged_records("t")
    assert merged, "the budget must make the timeline merge"
    counter = f"{tokenizer.name}/"
    by_key = {m.key: m for m in merged}

    def first_and_last(key: str) -> tuple[int, int]:
        """Positions of the first and last unit under a key: a unit's, or a merged record's, whose
        covers are units (an aligned group) or the items it merged (an unaligned one)."""
        if key in index.position:
            return index.position[key], index.position[key]
        covers = by_key[key].covers
        return first_and_last(covers[0])[0], first_and_last(covers[-1])[1]

    for record in merged:
        start, end = first_and_last(record.key)
        line = merged_line(index.notes[start], index.notes[end], record.text)
        assert record.line_counter.startswith(counter) and record.line_tokens == tokenizer.count(line) + 1
    again = FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder)
    assert again.render(history, namespace="t").messages == first.messages


def test_pieces_without_their_own_vector_hold_no_rows_and_score_by_their_note(tokenizer, hashing_embedder):
    """An agent history (piece vectors off by default) keeps no piece matrix: each piece's
    cosine is its note's, equal to the product over the materialised rows; the snapshot
    holds no rows for them; own vectors filled later, in any order, each sit at their own piece."""
    store = InMemoryStore()
    history = synthetic_history(120)
    cfg = FlexAMemConfig(tuning=Tuning(agent_unit_tokens=120))
    mem = FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder)
    mem.ingest(history[:500], namespace="t")
    index = mem.state("t").index
    assert index.own_piece_vectors == 0 and len(index._piece_vectors) == 0
    q = hashing_embedder.embed(["pytest failure in the parser"])[0]
    np.testing.assert_allclose(index.piece_cosines(None, q), index.piece_vectors @ q, rtol=1e-5, atol=1e-6)
    some = np.arange(0, len(index.doc_unit), 7)
    np.testing.assert_allclose(index.piece_cosines(some, q), index.piece_vectors[some] @ q, rtol=1e-5, atol=1e-6)
    index.save(tokenizer.name)
    saved = snapshot.decode(store.get_index_snapshot("t"), [n.unit_key for n in index.notes])
    assert saved is not None and saved["piece_vectors"].shape[0] == 0 and len(saved["own_docs"]) == 0
    # Own vectors filled for some pieces (as a catch-up's are after the call), out of order:
    # rows for those pieces only, each at its own piece.
    n = len(index.doc_unit)
    texts = [store.pieces("t", index.doc_unit[d])[index.doc_piece[d]].text for d in range(n)]
    later, first = np.arange(n // 2, n, 3), np.arange(1, n // 2, 4)
    for docs in (later, first, first[:3]):  # the last: already filled, kept as it is
        index.fill_piece_vectors(docs, hashing_embedder.embed([texts[d] for d in docs]) * (1 + (docs is first)))
    mixed = index
    filled = np.sort(np.r_[first, later])
    assert mixed.own_piece_vectors == len(filled) == len(mixed._piece_vectors)
    np.testing.assert_array_equal(mixed.missing_piece_docs(), np.setdiff1d(np.arange(n), filled))
    np.testing.assert_array_equal(mixed.piece_vectors[later], hashing_embedder.embed([texts[d] for d in later]))
    np.testing.assert_array_equal(mixed.piece_vectors[first], 2 * hashing_embedder.embed([texts[d] for d in first]))
    rest = mixed.missing_piece_docs()
    np.testing.assert_array_equal(mixed.piece_vectors[rest], mixed.vectors[mixed.doc_note_array()[rest]])
    np.testing.assert_allclose(mixed.piece_cosines(None, q), mixed.piece_vectors @ q, rtol=1e-5, atol=1e-6)
    picks = np.r_[some[:5], later[::2]]
    np.testing.assert_allclose(mixed.piece_cosines(picks, q), mixed.piece_vectors[picks] @ q, rtol=1e-5, atol=1e-6)
    mixed.save(tokenizer.name)
    reopened = FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder).state("t").index
    assert reopened.saved_covers == len(mixed.notes)
    np.testing.assert_array_equal(reopened.piece_vectors, mixed.piece_vectors)
    np.testing.assert_array_equal(reopened.piece_cosines(None, q), mixed.piece_cosines(None, q))


def test_a_piece_vector_of_another_dimension_is_refused_clearly(tokenizer, hashing_embedder):
    from dataclasses import replace

    from flexamem_core.index.namespace import NamespaceIndex

    store = InMemoryStore()
    FlexAMem(FlexAMemConfig(tuning=Tuning(agent_unit_tokens=120)), store=store, tokenizer=tokenizer,
             embedder=hashing_embedder).ingest(synthetic_history(10), namespace="t")
    index = NamespaceIndex(InMemoryStore(), "t")
    note = store.notes("t")[0]
    pieces = [replace(p, embedding=np.ones(3, dtype=np.float32)) for p in store.pieces("t", note.unit_key)]
    with pytest.raises(ValueError, match="dimension"):
        index.add(note, pieces)
    assert not index.notes and len(index.bm25) == 0 and not index.doc_unit  # nothing half-added
    index.add(note, store.pieces("t", note.unit_key))
    assert [n.unit_key for n in index.notes] == [note.unit_key]
