"""Guarantees that need real processes: concurrent appends, SIGKILL mid-write, restart.

Writers are separate Python processes (``store_worker.py``) opening the store from its
URL, exactly as several agent workers sharing one memory would.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import _make_backend
from langgraph_backends import sqlite_path
from store_worker import restart_history

from flexamem_core.stores.sqlite import wal_connection
from flexamem_core.testing.storekit import make_chain, snapshot

WORKER = str(Path(__file__).with_name("store_worker.py"))
NS = "team/run-1"


def worker(*args: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, WORKER, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.fixture(params=["sqlite", "postgres", "langgraph-sqlite"])
def shared_backend(request, tmp_path):
    yield from _make_backend(request.param, tmp_path)


@pytest.fixture(params=["sqlite", "postgres", "chroma-http", "langgraph-sqlite"])  # embedded Chroma: one process only
def crash_backend(request, tmp_path):
    yield from _make_backend(request.param, tmp_path)


@pytest.fixture(params=["sqlite", "postgres", "chroma", "chroma-http", "langgraph-sqlite"])
def persistent_backend(request, tmp_path):
    yield from _make_backend(request.param, tmp_path)


def test_eight_processes_appending_lose_nothing_and_agree_on_order(shared_backend):
    if not shared_backend.multi_writer:
        pytest.skip(f"{shared_backend.name}: a LangGraph BaseStore has no cross-process transaction "
                    "spanning 'is this unit stored?' and the write, so two processes appending the "
                    "same unit can both write it, and write order is each process's clock; use one "
                    "writer per namespace (or the SQLite / PostgreSQL backends) for concurrent appends")
    store = shared_backend.first
    own, shared, workers = 12, 6, 8
    procs = [worker("append", shared_backend.url, NS, f"w{i}", own, shared) for i in range(workers)]
    seen: list[list[str]] = []
    while any(p.poll() is None for p in procs):
        seen.append([n.unit_key for n in store.notes(NS)])
        time.sleep(0.02)
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    final = [n.unit_key for n in store.notes(NS)]
    seen.append(final)

    assert len(final) == len(set(final)) == workers * own + shared  # every unit exactly once
    shared_keys = [t[0].key for t in make_chain("shared", shared)]
    written = [k for r in results for k in r]
    assert sorted(written) == sorted(final)  # each unit reported written by exactly one process
    assert sum(k in shared_keys for k in written) == shared
    for earlier, later in zip(seen, seen[1:], strict=False):
        assert later[:len(earlier)] == earlier  # readers only ever see the history grow at its end
    position = {k: i for i, k in enumerate(final)}
    for i in range(workers):
        chain = [t[0].key for t in make_chain(f"w{i}", own)]
        assert sorted(chain, key=position.__getitem__) == chain  # each writer's order is kept
    assert list(store.parents(NS)) == final
    pieces = list(store.iter_pieces(NS))
    assert [p.unit_key for p in pieces] == [k for k in final for _ in range(3)]


def _check_consistent(store, pieces_per_unit: int) -> int:
    notes = store.notes(NS)
    keys = [n.unit_key for n in notes]
    assert list(store.parents(NS)) == keys  # a unit is stored with its note, or not at all
    by_unit: dict[str, list[int]] = {}
    for p in store.iter_pieces(NS):
        by_unit.setdefault(p.unit_key, []).append(p.index)
    assert list(by_unit) == keys
    assert all(v == list(range(pieces_per_unit)) for v in by_unit.values())  # all pieces, or none
    for key in keys:
        assert store.get_unit(NS, key).key == key
    return len(keys)


def test_sigkill_in_the_middle_of_a_batch_leaves_whole_units(crash_backend, tmp_path):
    pieces, rng, count = 40, random.Random(5), 0
    for round_ in range(3):
        proc = worker("forever", crash_backend.url, NS, f"crash{round_}", pieces)
        assert proc.stdout.readline().strip() == "started", proc.stderr.read()
        probe = crash_backend.open()
        deadline = time.monotonic() + 60
        target = count + rng.randint(2, 6)
        while len(probe.notes(NS)) < target and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.03))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        if not crash_backend.transactional:
            time.sleep(0.5)  # let the server finish a request the killed client had sent
        reopened = crash_backend.open()  # reopening after the crash works
        new_count = _check_consistent(reopened, pieces)
        assert new_count >= target
        count = new_count
    if crash_backend.name in {"sqlite", "langgraph-sqlite"}:
        conn = sqlite3.connect(sqlite_path(crash_backend.url))
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    after = crash_backend.open()
    (more,) = make_chain("after-crash", 1, n_pieces=pieces)
    assert after.write_unit(NS, *more)
    final = _check_consistent(after, pieces)
    if crash_backend.transactional:
        assert final == count + 1
    else:  # a Chroma server may still finish the add that a killed client had sent
        assert final >= count + 1


def test_a_store_reopened_after_its_writer_exited_reads_the_same(persistent_backend):
    proc = worker("restart", persistent_backend.url, NS)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    chain, merges = restart_history()
    store = persistent_backend.open()
    snap = snapshot(store, NS)
    assert snap["notes"] == [t[1].to_dict() for t in chain]
    assert snap["parents"] == {t[0].key: t[0].parent for t in chain}
    assert snap["pieces"] == [p.to_dict() for t in chain for p in t[2]]
    assert snap["units"] == {t[0].key: t[0].to_dict() for t in chain}
    for m in merges:
        assert store.get_merged(NS, m.key) == m
    assert snapshot(persistent_backend.open(), NS) == snap  # and again: reads are stable


def _open_at_once(path: str, barrier, results) -> None:
    barrier.wait()
    try:
        conn = wal_connection(path, timeout=30.0)
        results.put(conn.execute("PRAGMA journal_mode").fetchone()[0])
    except Exception as exc:  # reported to the test, not lost in a child's stderr
        results.put(f"{type(exc).__name__}: {exc}")


def test_processes_opening_a_new_file_together_all_get_wal(tmp_path):
    """Switching a new file to WAL can fail at once with "database is locked" while another
    process does the same (two eval workers on a fresh embedding cache did): every opener
    gets its connection in WAL mode."""
    ctx = multiprocessing.get_context("fork")
    for attempt in range(10):  # a plain connect failed in about 1 round of 4 here
        path = str(tmp_path / f"new-{attempt}.db")
        barrier, results = ctx.Barrier(6), ctx.Queue()
        procs = [ctx.Process(target=_open_at_once, args=(path, barrier, results)) for _ in range(6)]
        for p in procs:
            p.start()
        got = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(60)
        assert got == ["wal"] * 6, got
