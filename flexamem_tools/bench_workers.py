"""Several worker processes serving many agent threads on one store, for ``flexamem bench --workers``.

An agent server runs several worker processes, each serving several threads at once, and a
thread's next model call may land on any worker (replicas behind a load balancer, a job
queue). Here each of ``processes`` processes has ``threads`` threads taking jobs from its own
queue: a job is the next model call of one agent thread (its history as OpenAI-style dicts,
one step more than its last call), queued only once that thread's previous call was
answered. A round-robin balancer sends call ``i`` of agent ``a`` to process ``(a + i) mod
processes``, so every call of a thread lands on another process than its previous one (a
shared queue would leave that to the scheduler: one fast process can take every job) while
every thread advances in order. Each worker renders with
``FlexAMem.render`` (default settings, the hashing embedder: the load is the memory's, not
the model's) and checks the request it would send against the budget.

Afterwards every thread's stored units are compared with what one process writes for the
same history (none lost, none written twice), and each thread's requests with those one
process sends call by call (the cache-stable request continued across processes).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flexamem_core import FlexAMem, FlexAMemConfig, InMemoryStore
from flexamem_core.index.embeddings import HashingEmbedder
from flexamem_core.request.counting import count_messages
from flexamem_core.request.wire import chat_message
from flexamem_core.stores import open_store

from .bench import synthetic_history


@dataclass(frozen=True)
class LoadPlan:
    """What the load test runs: ``agents`` threads of ``steps`` tool steps each, rendered at
    ``budget`` by ``processes`` x ``threads`` workers on the store at ``url``."""

    url: str
    processes: int = 4
    threads: int = 8
    agents: int = 32
    steps: int = 40
    budget: int = 4000
    run: str = "load"

    def namespace(self, agent: int) -> str:
        return f"{self.run}/agent-{agent}"


def agent_calls(plan: LoadPlan, agent: int) -> list[list[dict[str, Any]]]:
    """The history before each model call of one agent thread (dicts, as a host passes them)."""
    history = [chat_message(m) for m in synthetic_history(plan.steps // 4 + 1, seed=agent)][:2 + 2 * plan.steps]
    return [history[:i] for i in range(2, len(history) + 1, 2)]


def _request_digest(messages: Sequence[Any]) -> str:
    wire = json.dumps([chat_message(m) for m in messages], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(wire.encode("utf-8", "surrogatepass")).hexdigest()


def _worker_process(plan: LoadPlan, jobs: Any, results: Any) -> None:
    """One worker process: one memory on the shared store, ``plan.threads`` threads taking jobs."""
    mem = FlexAMem(FlexAMemConfig(budget=plan.budget), store=open_store(plan.url), embedder=HashingEmbedder())
    calls = {a: agent_calls(plan, a) for a in range(plan.agents)}
    effective = mem.config.effective_budget

    def serve() -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            agent, i = job
            t0 = time.perf_counter()
            try:
                rendered = mem.render(list(calls[agent][i]), namespace=plan.namespace(agent))
            except Exception as exc:  # reported, and the run fails: a worker must not die silently
                results.put((agent, i, mp.current_process().name, None, repr(exc), 0, 0))
                continue
            ms = 1000 * (time.perf_counter() - t0)
            tokens = count_messages(rendered.messages, mem.tokenizer)
            results.put((agent, i, mp.current_process().name, ms, _request_digest(rendered.messages),
                         tokens, effective))

    results.put(("ready",))
    workers = [threading.Thread(target=serve) for _ in range(plan.threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def run_load(plan: LoadPlan) -> dict[str, Any]:
    """Run the plan; returns its figures (see the module docstring)."""
    ctx = mp.get_context("spawn")  # no fork of a process holding threads and connections
    jobs, results = [ctx.Queue() for _ in range(plan.processes)], ctx.Queue()
    procs = [ctx.Process(target=_worker_process, args=(plan, jobs[p], results), name=f"worker-{p}")
             for p in range(plan.processes)]

    def send(agent: int, i: int) -> None:
        jobs[(agent + i) % plan.processes].put((agent, i))

    for p in procs:
        p.start()
    n_calls = len(agent_calls(plan, 0))
    for _ in procs:  # every process ready (its memory open) before the first job
        if results.get(timeout=300) != ("ready",):
            raise RuntimeError("a worker process answered before it was ready")
    for agent in range(plan.agents):
        send(agent, 0)
    got: dict[tuple[int, int], tuple[Any, ...]] = {}
    t0 = time.perf_counter()
    try:
        while len(got) < plan.agents * n_calls:
            try:
                agent, i, *rest = results.get(timeout=300)
            except queue.Empty:
                raise RuntimeError("no worker answered for 300 s") from None
            got[(agent, i)] = tuple(rest)
            if i + 1 < n_calls:
                send(agent, i + 1)
    finally:
        for queue_of_process in jobs:
            for _ in range(plan.threads):
                queue_of_process.put(None)
        for p in procs:
            p.join(timeout=120)
    wall = time.perf_counter() - t0
    return _figures(plan, got, n_calls, wall)


def _figures(plan: LoadPlan, got: dict[tuple[int, int], tuple[Any, ...]], n_calls: int,
             wall: float) -> dict[str, Any]:
    errors = [f"agent {a} call {i}: {r[2]}" for (a, i), r in got.items() if r[1] is None]
    times = [r[1] for r in got.values() if r[1] is not None]
    over = sum(1 for r in got.values() if r[1] is not None and r[3] > r[4])
    hops = sum(1 for (a, i), r in got.items() if i and got[(a, i - 1)][0] != r[0])
    store = open_store(plan.url)
    lost = duplicated = differing = 0
    for agent in range(plan.agents):
        one = FlexAMem(FlexAMemConfig(budget=plan.budget), store=InMemoryStore(), embedder=HashingEmbedder())
        want = [_request_digest(one.render(c, namespace="one").messages) for c in agent_calls(plan, agent)]
        differing += sum(1 for i, w in enumerate(want) if got[(agent, i)][2] != w)
        expected = [n.unit_key for n in one.store.notes("one")]
        stored = [n.unit_key for n in store.notes(plan.namespace(agent))]
        lost += len(set(expected) - set(stored))
        duplicated += len(stored) - len(set(stored)) + len(set(stored) - set(expected))
    close = getattr(store, "close", None)
    if close is not None:
        close()
    return {"processes": plan.processes, "threads": plan.threads, "agents": plan.agents, "calls": len(got),
            "calls_served_by_another_process": hops, "errors": errors, "over_budget": over,
            "units_lost": lost, "units_duplicated": duplicated, "requests_unlike_one_process": differing,
            "render_ms_p50": float(np.percentile(times, 50)) if times else 0.0,
            "render_ms_p95": float(np.percentile(times, 95)) if times else 0.0,
            "render_ms_max": max(times, default=0.0), "calls_per_s": len(got) / max(wall, 1e-9), "wall_s": wall}
