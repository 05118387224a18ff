"""A reopen takes the notes its snapshot covers from the snapshot (format 4) when the store
can list its note keys and the notes after a position in one read (``NotesFrom``): it never
reads a row per covered note, and it renders what a reopen reading every note renders.
Snapshots of format 3 (no notes) and snapshots that no longer fit the store still load."""

from __future__ import annotations

import io

import numpy as np

from flexamem_core import FlexAMem, FlexAMemConfig, Tuning
from flexamem_core.index import snapshot
from flexamem_core.stores.sqlite import SQLiteStore
from flexamem_tools.bench import synthetic_history

CFG = FlexAMemConfig(budget=2500, cache_stable=False, tuning=Tuning(agent_unit_tokens=120))


class Reads(SQLiteStore):
    """The real SQLite store, counting the reads a reopen makes."""

    calls: dict[str, int]

    def __init__(self, path) -> None:
        super().__init__(path)
        self.calls = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def notes(self, namespace):
        self._count("notes")
        return super().notes(namespace)

    def iter_pieces(self, namespace):
        self._count("iter_pieces")
        return super().iter_pieces(namespace)

    def get_index_snapshot(self, namespace):
        self._count("get_index_snapshot")
        return super().get_index_snapshot(namespace)

    def keys_and_notes_from(self, namespace, start):
        self._count("keys_and_notes_from")
        return super().keys_and_notes_from(namespace, start)


def _written(tmp_path, tokenizer, embedder, units: int = 150):
    """A store whose snapshot covers most of its notes: a few were written after it."""
    path = tmp_path / "m.db"
    history = synthetic_history(units)
    store = SQLiteStore(path)
    FlexAMem(CFG, store=store, tokenizer=tokenizer, embedder=embedder).ingest(history[:-30], namespace="t")
    FlexAMem(CFG, store=store, tokenizer=tokenizer, embedder=embedder).ingest(history, namespace="t")
    store.close()
    return path, history


def _reopen(path, tokenizer, embedder):
    store = Reads(path)
    mem = FlexAMem(CFG, store=store, tokenizer=tokenizer, embedder=embedder)
    index = mem.state("t").index
    return store, mem, index


def test_a_reopen_reads_the_covered_notes_from_the_snapshot(tmp_path, tokenizer, hashing_embedder):
    path, history = _written(tmp_path, tokenizer, hashing_embedder)
    store, mem, index = _reopen(path, tokenizer, hashing_embedder)
    # the snapshot read once, no row per note, no piece re-read
    assert store.calls == {"get_index_snapshot": 1, "keys_and_notes_from": 1}
    assert 0 < index.saved_covers < len(index.notes)  # some notes came after the snapshot
    stored = store.notes("t")
    assert [n.to_dict(embedding=False) for n in index.notes] == [n.to_dict(embedding=False) for n in stored]
    np.testing.assert_array_equal(index.vectors, np.stack([n.embedding for n in stored]))
    got = mem.render(history, namespace="t")
    store.put_index_snapshot("t", b"")  # as a store without the snapshot: every note and piece read
    plain = FlexAMem(CFG, store=Reads(path), tokenizer=tokenizer, embedder=hashing_embedder)
    expected = plain.render(history, namespace="t")
    assert [m.to_dict() for m in got.messages] == [m.to_dict() for m in expected.messages]
    assert got.memory_text == expected.memory_text


def test_a_snapshot_of_format_3_still_loads_with_every_note_read(tmp_path, tokenizer, hashing_embedder):
    path, history = _written(tmp_path, tokenizer, hashing_embedder)
    store = SQLiteStore(path)
    arrays = dict(snapshot.read(store.get_index_snapshot("t")))
    covers, keys = int(arrays.pop("covers")), arrays.pop("keys")
    arrays.pop("format")
    arrays.pop("note_vectors"), arrays.pop("note_data")
    buf = io.BytesIO()
    np.savez(buf, format=np.int64(3), covers=np.int64(covers), keys=keys, **arrays)
    store.put_index_snapshot("t", buf.getvalue())
    store.close()
    reopened, mem, index = _reopen(path, tokenizer, hashing_embedder)
    # every note read, the index from the snapshot (read once, no piece)
    assert reopened.calls == {"get_index_snapshot": 1, "notes": 1}
    assert index.saved_covers == covers
    assert mem.render(history, namespace="t").memory_text


def test_a_snapshot_that_no_longer_fits_the_notes_is_not_used(tmp_path, tokenizer, hashing_embedder):
    path, _ = _written(tmp_path, tokenizer, hashing_embedder)
    store = SQLiteStore(path)
    first = store.notes("t")[0].unit_key
    store.close()
    # another process deletes the first unit but its snapshot was written back meanwhile
    store = SQLiteStore(path)
    kept = store.get_index_snapshot("t")
    store.delete_unit("t", first)
    store.put_index_snapshot("t", kept)
    store.close()
    reopened, _, index = _reopen(path, tokenizer, hashing_embedder)
    assert first not in index.position
    assert [n.unit_key for n in index.notes] == [n.unit_key for n in reopened.notes("t")]
    assert "iter_pieces" in reopened.calls  # rebuilt from the pieces
