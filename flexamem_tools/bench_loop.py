"""The memory's time per step of a real agent loop, for ``flexamem bench --loop TRAJECTORIES``.

Saved mini-swe-agent runs are replayed as their agent made them: before every model call of
a run, the history so far goes through an adapter (mini-swe-agent's ``FlexAMemModel.render``
on its message dicts, or the LangChain render the ``create_agent`` middleware makes, on
LangChain messages), with the real embedder, one fresh memory per run, and ``--pause``
seconds between steps standing for the model call a real host waits for. Only the memory's
own call is timed. Beside it, in the same run and on the same histories, a truncation
baseline (the newest messages that fit, counted from the newest back on every call, as
LangChain's ``trim_messages`` does). With ``--busy N``, N CPU-bound processes run beside the
loop (each stops after ``--busy-seconds`` at most): the case of a batch of agents on one
machine.

A step that completes a unit writes it (its notes embedded); the rows split the steps that
wrote a unit from those that did not, and give the write cost per unit as the extra time of
the writing steps.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from flexamem_core.memory import FlexAMem
from flexamem_core.model.messages import Message
from flexamem_core.request.tokens import TiktokenTokenizer

#: The adapters a loop goes through, in the order the rows list them.
LOOP_PATHS = ("minisweagent", "langchain")

#: One model call's render of the history so far; returns the namespace it rendered in.
Step = Callable[[Sequence[Mapping[str, Any]]], str]


def _spin(seconds: float, parent: int) -> None:
    """A CPU-bound process: busy until ``seconds`` have passed or its parent is gone."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and os.getppid() == parent:
        for _ in range(100_000):
            pass


@contextmanager
def busy_processes(n: int, seconds: float) -> Iterator[None]:
    """``n`` CPU-bound processes running for the block (each stops after ``seconds`` at most,
    or when this process is gone: a benchmark killed midway leaves none behind)."""
    procs = [mp.get_context("spawn").Process(target=_spin, args=(seconds, os.getpid()), daemon=True)
             for _ in range(n)]
    for p in procs:
        p.start()
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def _minisweagent(mem: FlexAMem, budget: int) -> Step:
    from flexamem_minisweagent import FlexAMemModel
    from minisweagent.models.test_models import DeterministicModel

    model = FlexAMemModel(inner=DeterministicModel(outputs=[]), memory=mem,
                          flexamem={"budget": budget, "tool_schema_tokens": 0})

    def step(messages: Sequence[Mapping[str, Any]]) -> str:
        model.render(messages)
        return str(model.current_namespace)
    return step


def _langchain(mem: FlexAMem, budget: int) -> Step:
    from flexamem_langgraph.convert import from_core_message
    from flexamem_langgraph.render import render_langchain

    converted: list[Any] = []  # the host's own message objects, made once each, as a graph state holds them

    def step(messages: Sequence[Mapping[str, Any]]) -> str:
        converted.extend(from_core_message(Message.from_dict(dict(m))) for m in messages[len(converted):])
        return render_langchain(mem, converted[: len(messages)], namespace="loop", budget=budget).namespace
    return step


_STEPS: dict[str, Callable[[FlexAMem, int], Step]] = {"minisweagent": _minisweagent, "langchain": _langchain}


def truncate(messages: Sequence[Mapping[str, Any]], budget: int, count: Callable[[str], int]
             ) -> list[Mapping[str, Any]]:
    """The baseline: the system message and task, then the newest messages that fit the budget,
    each counted on every call (``count``: o200k without a memo, as a stateless trim counts)."""
    head = list(messages[:2])
    room = budget - sum(count(str(m.get("content") or "")) + 4 for m in head)
    kept: list[Mapping[str, Any]] = []
    for m in reversed(messages[2:]):
        room -= count(str(m.get("content") or "")) + 4
        if room < 0:
            break
        kept.append(m)
    return head + kept[::-1]


@dataclass
class LoopTimes:
    """Milliseconds per step, and units written by each step."""

    ms: list[float]
    written: list[int]

    def rows(self) -> dict[str, float]:
        ms, written = np.asarray(self.ms), np.asarray(self.written)
        out = {"steps": float(len(ms)), "ms_p50": float(np.percentile(ms, 50)), "ms_mean": float(ms.mean()),
               "ms_p95": float(np.percentile(ms, 95)), "ms_max": float(ms.max())}
        if len(written):
            writing, quiet = ms[written > 0], ms[written == 0]
            out["units_written"] = float(written.sum())
            if len(writing) and len(quiet):
                out["ms_mean_steps_writing"] = float(writing.mean())
                out["ms_mean_steps_not_writing"] = float(quiet.mean())
                out["write_ms_per_unit"] = float((writing.sum() - len(writing) * quiet.mean()) / written.sum())
        return out


def time_loop(path: str, runs: Sequence[Mapping[str, Any]], budget: int, pause: float,
              make_mem: Callable[[], FlexAMem]) -> tuple[LoopTimes, LoopTimes]:
    """The memory's and the truncation baseline's time per step over ``runs`` through ``path``."""
    from flexamem_minisweagent.trajectory import model_calls

    count = TiktokenTokenizer().count_uncached
    mem_times, base_times = LoopTimes([], []), LoopTimes([], [])
    for run in runs:
        messages = run["messages"]
        mem = make_mem()
        step = _STEPS[path](mem, budget)
        units = 0
        for index in model_calls(messages):
            history = messages[:index]
            t0 = time.perf_counter()
            namespace = step(history)
            mem_times.ms.append(1000 * (time.perf_counter() - t0))
            now = len(mem.state(namespace).index.notes)
            mem_times.written.append(now - units)
            units = now
            t0 = time.perf_counter()
            truncate(history, budget, count)
            base_times.ms.append(1000 * (time.perf_counter() - t0))
            if pause:
                time.sleep(pause)
    return mem_times, base_times


def loop_rows(data: str, limit: int, budget: int, pause: float, busy: int, busy_seconds: float,
              paths: Sequence[str], print_fn: Callable[[str], None] = print, idle: bool = True
              ) -> list[dict[str, Any]]:
    """Rows of ``flexamem bench --loop``: per path and load, the memory's and truncation's times
    (``idle=False``: only the pass beside the ``busy`` processes)."""
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    from flexamem_minisweagent.settings import FlexAMemSettings
    from flexamem_minisweagent.trajectory import load_trajectories

    from flexamem_core.host import config_for_budget
    from flexamem_core.index.embeddings import default_embedder

    runs = load_trajectories(data)[:limit]
    embedder = default_embedder()
    embedder.load()
    configs = {"minisweagent": FlexAMemSettings().core_config(budget), "langchain": config_for_budget(budget)}
    rows: list[dict[str, Any]] = []
    loads = [("idle", 0)] * (idle or not busy) + ([(f"beside {busy} CPU-bound processes", busy)] if busy else [])
    for load, n in loads:
        for path in paths:
            config = configs[path]
            with busy_processes(n, busy_seconds):
                embedder._cache.clear()  # each run embeds what it writes
                mem_t, base_t = time_loop(path, runs, budget, pause,
                                          lambda config=config: FlexAMem(config, embedder=embedder))
            for method, times in (("flexamem", mem_t), ("truncation", base_t)):
                row = {"path": path, "load": load, "method": method, "runs": len(runs), "budget": budget,
                       "pause_s": pause, **times.rows()}
                rows.append(row)
                print_fn(f"{path:<13} {load:<32} {method:<11} p50 {row['ms_p50']:8.2f}  mean {row['ms_mean']:8.2f}  "
                         f"p95 {row['ms_p95']:8.2f}  max {row['ms_max']:8.2f} ms"
                         + (f"  write/unit {row['write_ms_per_unit']:.1f} ms" if "write_ms_per_unit" in row else ""))
    return rows
