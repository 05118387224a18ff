"""A call that loads a namespace from its store runs without the cyclic collector
(``flexamem_core.collector``), freezes what it loaded, and leaves the collector as it found
it; the pause nests and is shared between threads."""

from __future__ import annotations

import gc
import threading

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.bench import synthetic_history
from flexamem_core.collector import collector_paused
from flexamem_core.render import BudgetError
from flexamem_core.stores import SQLiteStore


@pytest.fixture
def collections():
    """Collections that run while the test body does."""
    seen: list[int] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(callback)
    try:
        yield seen
    finally:
        gc.callbacks.remove(callback)
        gc.unfreeze()  # what the calls froze is the test's garbage


@pytest.fixture
def written(tmp_path, tokenizer, hashing_embedder):
    """A store file with a namespace of about 70 units, and the history that wrote it."""
    path = tmp_path / "m.db"
    history = synthetic_history(70)
    config = FlexAMemConfig(budget=3000, agent_unit_tokens=120)
    FlexAMem(config, store=SQLiteStore(path), tokenizer=tokenizer, embedder=hashing_embedder).ingest(
        history, namespace="t")
    return path, history, config


def _reopened(written, tokenizer, hashing_embedder) -> FlexAMem:
    path, _, config = written
    return FlexAMem(config, store=SQLiteStore(path), tokenizer=tokenizer, embedder=hashing_embedder)


def test_a_reopening_render_runs_no_collection_and_freezes_what_it_loaded(written, tokenizer, hashing_embedder,
                                                                          collections):
    mem = _reopened(written, tokenizer, hashing_embedder)
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    rendered = mem.render(written[1], namespace="t")
    assert collections == []  # without the pause, the load's allocations start young collections
    assert gc.isenabled()
    assert gc.get_freeze_count() > frozen
    assert rendered.report["old_units"] > 50
    # the next call finds the namespace loaded: the collector runs as usual during it
    gc.collect(0)
    assert collections == [0]


def test_a_host_that_turned_the_collector_off_keeps_it_off(written, tokenizer, hashing_embedder):
    mem = _reopened(written, tokenizer, hashing_embedder)
    gc.disable()
    try:
        mem.render(written[1], namespace="t")
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_failed_reopening_call_resumes_the_collector(written, tokenizer, hashing_embedder):
    mem = _reopened(written, tokenizer, hashing_embedder)
    with pytest.raises(BudgetError):  # raised inside the call, once the namespace is loaded
        mem.render(written[1], namespace="t", budget=40)
    assert gc.isenabled()
    assert mem.render(written[1], namespace="t").report["old_units"] > 50


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
