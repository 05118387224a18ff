"""Several processes serving one thread send the requests one process would send.

The store keeps each thread's previous cache-stable request (``RequestStates``), so the
process that serves a call continues the request another process made: the prompt prefix
holds across workers and restarts, and which worker serves a call does not change what is
sent. Workers are separate processes (``request_worker.py``) opening the store from its URL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import _make_backend
from request_worker import serve

from flexamem_core import FlexAMem, FlexAMemConfig, InMemoryStore
from flexamem_core.index.embeddings import HashingEmbedder
from tests.agent_runs import model_calls, text_action_run

WORKER = str(Path(__file__).with_name("request_worker.py"))
BUDGET = 3000


class Worker:
    """A long-lived worker process, answering one call at a time."""

    def __init__(self, url: str, namespace: str) -> None:
        self.proc = subprocess.Popen([sys.executable, WORKER, url, namespace, str(BUDGET)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def call(self, n: int) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"worker died: {self.proc.stderr.read() if self.proc.stderr else ''}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write("\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_backend(request, tmp_path):
    yield from _make_backend(request.param, tmp_path)


def test_two_processes_alternating_send_what_one_process_sends(shared_backend):
    calls = model_calls(text_action_run())
    one = FlexAMem(FlexAMemConfig(budget=BUDGET), store=InMemoryStore(), embedder=HashingEmbedder())
    want = [serve(one, "thread", c) for c in calls]
    workers = [Worker(shared_backend.url, "thread") for _ in range(2)]
    try:
        got = [workers[i % 2].call(i) for i in range(len(calls))]
    finally:
        for w in workers:
            w.close()
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"call {i}: {g['step']} against {w['step']}"
    steps = [g["step"] for g in got]
    # every call after the first is served by the other process: appends and extends continue
    # the request that process did not make
    assert Counter(steps).most_common(1)[0][0] == "append" and "extend" in steps and "render" in steps, steps


def test_a_restarted_process_continues_the_thread(shared_backend):
    calls = model_calls(text_action_run())
    one = FlexAMem(FlexAMemConfig(budget=BUDGET), store=InMemoryStore(), embedder=HashingEmbedder())
    want = [serve(one, "thread", c) for c in calls]
    # restart before a call that one process answers without rendering afresh
    restart = next(i for i in range(20, len(calls)) if want[i]["step"] != "render")
    first = Worker(shared_backend.url, "thread")
    got = [first.call(i) for i in range(restart)]
    first.proc.kill()  # no clean shutdown: what the next process reads is what was saved
    first.proc.wait(timeout=60)
    second = Worker(shared_backend.url, "thread")
    try:
        got += [second.call(i) for i in range(restart, len(calls))]
    finally:
        second.close()
    assert got == want
    assert got[restart]["step"] != "render", "the restarted process continued the saved request"
