"""A call loads a namespace from its store and matches its stored chain without the cyclic
collector (``flexamem_core.render.collector``), freezes what that built, writes with the collector
on, and leaves it as it found it; the pause nests and is shared between threads."""

from __future__ import annotations

import gc
import threading

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig, Tuning
from flexamem_core.index.embeddings import HashingEmbedder
from flexamem_core.render.collector import BULK, collector_paused
from flexamem_core.request.budget import BudgetError
from flexamem_core.stores import SQLiteStore
from flexamem_tools.bench import synthetic_history


class _WatchedStore(SQLiteStore):
    """SQLite, noting whether the collector ran while the index snapshot was read."""

    collector_on_load: list[bool]

    def get_index_snapshot(self, namespace):
        self.collector_on_load.append(gc.isenabled())
        return super().get_index_snapshot(namespace)


class _WatchedEmbedder(HashingEmbedder):
    """The model-free embedder, noting whether the collector ran while units were embedded."""

    def __init__(self) -> None:
        super().__init__()
        self.collector_on_write: list[bool] = []

    def embed(self, texts):
        self.collector_on_write.append(gc.isenabled())
        return super().embed(texts)


@pytest.fixture
def written(tmp_path, tokenizer, hashing_embedder):
    """A store file with a namespace of about 1,100 units (a bulk load: ``BULK`` or more), and
    the history that wrote it; the history goes on for a few more steps."""
    path = tmp_path / "m.db"
    history = synthetic_history(290)
    config = FlexAMemConfig(budget=3000, tuning=Tuning(agent_unit_tokens=120))
    FlexAMem(config, store=SQLiteStore(path), tokenizer=tokenizer, embedder=hashing_embedder).ingest(
        history[:-40], namespace="t")
    yield path, history, config
    gc.unfreeze()  # what the calls froze is the test's garbage


def _reopened(written, tokenizer, hashing_embedder) -> FlexAMem:
    path, _, config = written
    return FlexAMem(config, store=SQLiteStore(path), tokenizer=tokenizer, embedder=hashing_embedder)


def test_a_reopen_loads_and_matches_with_the_collector_paused_and_writes_with_it_on(written, tokenizer):
    path, history, config = written
    store, embedder = _WatchedStore(path), _WatchedEmbedder()
    store.collector_on_load = []
    mem = FlexAMem(config, store=store, tokenizer=tokenizer, embedder=embedder)
    assert gc.isenabled()
    embedder.collector_on_write.clear()
    mem.ingest(history, namespace="t")  # the stored chain, then new units to write
    assert store.collector_on_load == [False]
    assert embedder.collector_on_write and all(embedder.collector_on_write)
    assert gc.isenabled()
    space = mem.state("t")
    assert len(space.index.notes) >= BULK
    # what the load and the match built is frozen: no collection walks it again
    tracked = {id(o) for o in gc.get_objects()}
    old = [u for u in space.units if u.key in space.index.position][: len(space.index.notes) - 20]
    assert len(old) >= BULK
    assert not any(id(x) in tracked for u in old for x in (u, u.messages, space.index.note(u.key)))


def test_a_host_that_turned_the_collector_off_keeps_it_off(written, tokenizer, hashing_embedder):
    mem = _reopened(written, tokenizer, hashing_embedder)
    gc.disable()
    try:
        mem.render(written[1], namespace="t")
        assert not gc.isenabled()
    finally:
        gc.enable()


class _FailingStore(SQLiteStore):
    """SQLite whose snapshot read fails once (a disk error in the middle of a load)."""

    failures = 1

    def get_index_snapshot(self, namespace):
        if self.failures:
            self.failures -= 1
            raise OSError("snapshot unreadable")
        return super().get_index_snapshot(namespace)


def test_a_load_that_fails_resumes_the_collector(written, tokenizer, hashing_embedder):
    path, history, config = written
    mem = FlexAMem(config, store=_FailingStore(path), tokenizer=tokenizer, embedder=hashing_embedder)
    with pytest.raises(OSError, match="snapshot unreadable"):  # raised inside the pause
        mem.render(history, namespace="t")
    assert gc.isenabled()
    with pytest.raises(BudgetError):  # raised after the load, inside the call
        mem.render(history, namespace="t", budget=40)
    assert gc.isenabled()
    assert mem.render(history, namespace="t").report["old_units"] > BULK


def test_the_pause_nests_and_resumes_after_the_last_of_concurrent_pauses():
    assert gc.isenabled()
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()

    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collector_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other)
    thread.start()
    inside.wait(10)
    with collector_paused():
        pass
    assert not gc.isenabled()  # the other thread's pause still holds
    release.set()
    thread.join(10)
    assert gc.isenabled()
