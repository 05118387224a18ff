"""``flexamem bench``: render latency and write cost at 100, 1,000 and 10,000 units (100,000 with ``--sizes``).

Everything is measured in one run and reported next to baselines from the same run:
re-tokenizing the whole history once, which is what a memory that rescans the history
on every call would pay at least, and one rank-bm25 query over the same pieces. Query
embedding is timed separately from rendering; each mode is timed with the paper's render
on every call and with the default cache-stable request, with the garbage-collection
pauses that fell inside the renders and the most texts one render embedded, for the
automatic mode (the default) and the unit and piece modes.
Building the large stores with the neural embedder would take far too long on a CPU, so
they are written with the model-free hashing embedder and the real model's cost per unit
is measured on a sample and reported on its own line.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import random
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from tqdm import tqdm

from flexamem_core import registered_strategies
from flexamem_core.config import FlexAMemConfig
from flexamem_core.index.embeddings import HashingEmbedder, default_embedder
from flexamem_core.memory import FlexAMem
from flexamem_core.model.messages import Message, ToolCall
from flexamem_core.model.protocols import Embedder, Store
from flexamem_core.request.tokens import TiktokenTokenizer, default_tokenizer
from flexamem_core.write.units import pack_units

from .bench_first_call import FIRST_CALL_PATHS, first_call_rows
from .bench_loop import LOOP_PATHS, loop_rows
from .bench_paths import PATHS, host_path, time_path

HELP = "measure render latency and write cost at 100/1,000/10,000 units"

#: The strategies timed by default: auto, the default of every adapter, and the paper's two.
DEFAULT_MODES = ("auto", "unit", "piece")


class TimedEmbedder:
    """Delegates to an embedder; keeps the time spent in it and the texts of each call
    (to time renders without it, and to check a render embeds only its query)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        t0, c0 = time.perf_counter(), time.process_time()
        self.calls.append(len(texts))
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - t0
            self.cpu_seconds += time.process_time() - c0


class GCPauses:
    """Durations of the garbage collections that run while it is active (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._start = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append((int(info.get("generation", 0)), 1000 * (time.perf_counter() - self._start)))

    def __enter__(self) -> GCPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def synthetic_history(units: int, seed: int = 0) -> list[Message]:
    """An agent run of ``4 * units`` tool steps of about 370 tokens each (a unit of the default
    1,000 tokens packs three of them, so it holds more than ``units`` units)."""
    rng = random.Random(seed)
    words = ["config", "parser", "module", "value", "error", "result", "cache", "index", "record", "token"]
    msgs = [Message(role="system", content="You are a coding agent.", id="sys"),
            Message(role="user", content="Make the test suite pass.", id="task")]
    for i in range(units * 4):
        path = f"src/pkg_{i % 97}/mod_{i % 13}.py"
        call = ToolCall(name="run_shell", arguments=json.dumps({"command": f"grep -n {words[i % 10]} {path}"}),
                        id=f"c{i}")
        out = "\n".join(f"{path}:{j}: {rng.choice(words)}_{rng.randint(0, 9999)} = {rng.choice(words)}({j})"
                        for j in range(18))
        msgs.append(Message(role="assistant", content=f"Checking {path}", tool_calls=(call,), id=f"a{i}"))
        msgs.append(Message(role="tool", content=out, tool_call_id=f"c{i}", name="run_shell", id=f"t{i}"))
    return msgs


def _bench_messages(size: int, renders: int) -> list[Message]:
    """The synthetic run a bench of ``size`` units grows (more steps than it ever renders)."""
    return synthetic_history(size + renders // 4 + 2, seed=size)


def bench_history(size: int, renders: int, unit_tokens: int | None = None) -> tuple[list[Message], int]:
    """The history a bench of ``size`` units grows over ``renders`` calls, and how many of its
    messages write exactly ``size`` units (what is written before the timed calls).

    The cut comes from the core's own packing (:func:`pack_units`, units of ``unit_tokens``,
    the default config's when None), so the size asked for is the size written: the first
    step after the ``size``-th unit is included, since that step is what completes it."""
    unit_tokens = unit_tokens or FlexAMemConfig().unit_tokens
    history = _bench_messages(size, renders)
    packed = pack_units(history[2:], "agent", default_tokenizer(), unit_tokens)
    if len(packed) <= size:
        raise ValueError(f"the synthetic history holds {len(packed)} units, fewer than {size}")
    return history, 2 + sum(len(u.messages) for u in packed[:size]) + 2


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def _rank_bm25_ms(mem: FlexAMem, namespace: str, query: str) -> float | None:
    """One rank-bm25 query over the same pieces (the library a user would reach for), or None
    when rank-bm25 (a test dependency) is not installed."""
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        return None
    from flexamem_core.index.bm25 import terms

    corpus = [terms(p.text) or ["_"] for p in mem.store.iter_pieces(namespace)]
    bm25 = BM25Okapi(corpus, k1=mem.config.tuning.bm25_k1, b=mem.config.tuning.bm25_b)
    t0 = time.perf_counter()
    bm25.get_scores(terms(query))
    return 1000 * (time.perf_counter() - t0)


def _time_renders(mem: FlexAMem, history: list[Message], cut: int, renders: int, namespace: str,
                  timed: TimedEmbedder) -> dict[str, Any]:
    """Render the growing history ``renders`` times (one new step a call), timing the render
    apart from the query embedding and from writing the units the new step completes,
    counting the texts each render embeds and the garbage-collection pauses.

    Wall time on a shared machine also counts what other processes ran meanwhile, so the
    CPU time of this process in each render (``time.process_time``, the embedding's left
    out as well) is reported beside it; both are medians and 95th percentiles."""
    render_ms, cpu_ms, embed_ms, texts, steps = [], [], [], [], []
    with GCPauses() as gcp:
        for r in range(renders):
            hist = history[: cut + 2 * (r + 1)]
            mem.ingest(hist, namespace=namespace)  # a unit completed by this step: written, not rendered
            before, cpu_before, n_calls = timed.seconds, timed.cpu_seconds, len(timed.calls)
            t0, c0 = time.perf_counter(), time.process_time()
            out = mem.render(hist, namespace=namespace)
            total, cpu = time.perf_counter() - t0, time.process_time() - c0
            spent = timed.seconds - before
            embed_ms.append(1000 * spent)
            render_ms.append(1000 * (total - spent))
            cpu_ms.append(1000 * (cpu - (timed.cpu_seconds - cpu_before)))
            texts.append(sum(timed.calls[n_calls:]))
            steps.append(out.report.get("cache", {}).get("step", "render"))
    render_ms = render_ms[1:] or render_ms  # the first call builds the namespace state
    cpu_ms = cpu_ms[1:] or cpu_ms
    gc_max = max((ms for _, ms in gcp.pauses), default=0.0)
    return {"render_ms_p50": _pct(render_ms, 50), "render_ms_p95": _pct(render_ms, 95),
            "render_cpu_ms_p50": _pct(cpu_ms, 50), "render_cpu_ms_p95": _pct(cpu_ms, 95),
            "query_embed_ms_p50": _pct(embed_ms, 50), "max_texts_embedded_per_render": max(texts, default=0),
            "gc_max_pause_ms": gc_max, "gc_full_collections": sum(1 for g, _ in gcp.pauses if g == 2),
            "appended_share": steps.count("append") / max(1, len(steps))}


def measure(size: int, renders: int, budget: int, embedder: Embedder, store_url: str = "memory://",
            modes: Sequence[str] = DEFAULT_MODES, paths: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Write a store of ``size`` units, then time renders of each recovery strategy in ``modes``
    as the run grows, with the paper's render on every call and with the default
    cache-stable request; then reopen the store and time the first render."""
    from flexamem_core.stores.url import open_store

    tk = default_tokenizer()
    history, cut = bench_history(size, renders, FlexAMemConfig(budget=budget).unit_tokens)
    timed = TimedEmbedder(embedder)
    store = open_store(store_url)
    namespace = f"bench-{size}-{random.Random().randrange(1 << 30)}"  # a fresh namespace in a shared store
    mem = FlexAMem(FlexAMemConfig(budget=budget), store=store, tokenizer=tk, embedder=timed)
    rows, rescan_ms = _write_and_baselines(mem, history, cut, namespace, timed, size)
    units = int(rows[0]["units"])
    for mode in modes:
        for stable in (False, True):
            m = FlexAMem(FlexAMemConfig(budget=budget, mode=mode, cache_stable=stable), store=mem.store,
                         tokenizer=tk, embedder=timed)
            m.render(history[:cut], namespace=namespace)  # builds the namespace state (timed below)
            got = _time_renders(m, history, cut, renders, namespace, timed)
            setting = "stable" if stable else "per-call"
            for metric, value in got.items():
                rows.append({"units": units, "mode": f"{mode}/{setting}", "metric": metric, "value": value})
            rows.append({"units": units, "mode": f"{mode}/{setting}", "metric": "render_p50_over_full_retokenize",
                         "value": got["render_ms_p50"] / max(rescan_ms, 1e-9)})
    rows += _path_rows(mem, history, cut, renders, namespace, units, paths)
    del mem
    rows += _reopen_rows(store, store_url, namespace, size, renders, budget, timed, units, cut + 2 * renders)
    for row in rows:
        row["store"] = store_url.split(":", 1)[0]
    return rows


def _path_rows(mem: FlexAMem, history: list[Message], cut: int, renders: int, namespace: str, units: int,
               paths: Sequence[str]) -> list[dict[str, Any]]:
    """The default render (auto, cache-stable) through each host path of ``paths``, each in its
    own namespace of the same store, with its p50 over the core path's where both ran."""
    rows: list[dict[str, Any]] = []
    core_p50 = None
    for name in paths:
        path = host_path(name)
        if isinstance(path, str):
            rows.append({"units": units, "mode": f"path:{name}", "metric": "skipped", "value": 0.0, "why": path})
            continue
        m = FlexAMem(mem.config, store=mem.store, tokenizer=mem.tokenizer, embedder=mem.embedder)
        got = time_path(path, m, history, cut, renders, f"{namespace}-{name}")
        core_p50 = got["render_ms_p50"] if name == "core" else core_p50
        for metric, value in got.items():
            rows.append({"units": units, "mode": f"path:{name}", "metric": metric, "value": value})
        if core_p50 and name != "core":
            rows.append({"units": units, "mode": f"path:{name}", "metric": "render_p50_over_core_path",
                         "value": got["render_ms_p50"] / core_p50})
    return rows


def _write_and_baselines(mem: FlexAMem, history: list[Message], cut: int, namespace: str,
                         timed: TimedEmbedder, size: int) -> tuple[list[dict[str, Any]], float]:
    """Write the first ``cut`` messages, and time the baselines on them: re-tokenizing the whole
    history, and one rank-bm25 query over the same pieces. Returns the rows and the first."""
    tk = mem.tokenizer
    t0 = time.perf_counter()
    with tqdm(total=size, desc=f"writing {size} units", unit="unit", leave=False, disable=None) as bar:
        written = mem.ingest(history[:cut], namespace=namespace, progress=bar)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for m in history[:cut]:
        tk._cache.pop(m.text, None) if hasattr(tk, "_cache") else None  # type: ignore[attr-defined]
        tk.count(m.text)
    rescan_ms = 1000 * (time.perf_counter() - t0)
    units = len(mem.store.notes(namespace))
    rows: list[dict[str, Any]] = [
        {"units": units, "metric": "write_ms_per_unit_without_embedding",
         "value": 1000 * (write_s - timed.seconds) / max(1, written)},
        {"units": units, "metric": "baseline_full_retokenize_ms", "value": rescan_ms}]
    bm25_ms = _rank_bm25_ms(mem, namespace, history[cut].text + history[cut + 1].text) if units <= 20_000 else None
    if bm25_ms is not None:
        rows.append({"units": units, "metric": "baseline_rank_bm25_query_ms", "value": bm25_ms})
    return rows, rescan_ms


def _reopen_rows(store: Store, store_url: str, namespace: str, size: int, renders: int, budget: int,
                 timed: TimedEmbedder, units: int, end: int) -> list[dict[str, Any]]:
    """Reopen the store and render once: in new processes (a persistent store) and in this one."""
    from flexamem_core.stores.url import open_store

    history = _bench_messages(size, renders)[:end]
    rows: list[dict[str, Any]] = []
    # As after a restart: the writer has closed the store (SQLite moves its write-ahead log
    # into the file), its writes are on disk, and this run's memory states are gone. A process
    # started next to a large heap runs the same reopen more slowly, so the states are
    # released first and the new-process figure is the fastest of three, as timeit reports.
    gc.unfreeze()  # FlexAMem froze the loaded indexes (gc.freeze) to keep them out of collections
    gc.collect()
    if store_url != "memory://":
        close = getattr(store, "close", None)
        if callable(close):
            close()
        os.sync()
        times = []
        for _ in range(3):
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                times.append(pool.submit(reopen_in_new_process, store_url, namespace, size, renders, budget,
                                             end).result())
        rows.append({"units": units, "metric": "open_and_first_render_new_process_ms", "value": min(times),
                     "slowest_of_3_ms": max(times)})
    # In this process: a new store object and a tokenizer with no counts cached (the BPE
    # tables stay loaded: that is process start, not reopening).
    t0, c0 = time.perf_counter(), time.process_time()
    reopened = FlexAMem(FlexAMemConfig(budget=budget), store=open_store(store_url) if store_url != "memory://"
                        else store, tokenizer=TiktokenTokenizer(), embedder=timed)
    reopened.render(history, namespace=namespace)
    rows.append({"units": units, "metric": "open_and_first_render_ms", "value": 1000 * (time.perf_counter() - t0)})
    rows.append({"units": units, "metric": "open_and_first_render_cpu_ms", "value": 1000 * (time.process_time() - c0)})
    return rows


def reopen_in_new_process(store_url: str, namespace: str, size: int, renders: int, budget: int, end: int) -> float:
    """Milliseconds to open ``store_url`` and render once, in this (fresh) process, once the
    tokenizer's tables are loaded and the modules imported (process start, not reopening)."""
    from flexamem_core.stores.url import open_store

    history = _bench_messages(size, renders)[:end]
    tokenizer, embedder = TiktokenTokenizer(), HashingEmbedder()
    tokenizer.count("warm up")
    embedder.embed(["warm up"])  # the embedder's own start (here scikit-learn's import)
    t0 = time.perf_counter()
    mem = FlexAMem(FlexAMemConfig(budget=budget), store=open_store(store_url), tokenizer=tokenizer,
                   embedder=embedder)
    mem.render(history, namespace=namespace)
    return 1000 * (time.perf_counter() - t0)


def embedding_cost(sample: int) -> dict[str, Any]:
    """Write cost per unit with the real all-MiniLM-L6-v2 model, on a small store."""
    timed = TimedEmbedder(default_embedder())
    timed.embed(["warm up"])
    timed.seconds = 0.0
    mem = FlexAMem(FlexAMemConfig(), embedder=timed)
    t0 = time.perf_counter()
    written = mem.ingest(synthetic_history(sample + 1, seed=99)[: 2 + sample * 8], namespace="embed")
    total = time.perf_counter() - t0
    timed_write_s = timed.seconds
    query_ms = []
    for unit in synthetic_history(12, seed=5)[2:][::8]:  # queries as agents make them: a unit's text
        timed.seconds = 0.0
        timed.embed([f"{unit.text} {len(query_ms)}"])
        query_ms.append(1000 * timed.seconds)
    return {"units": sample, "metric": "write_ms_per_unit_with_minilm", "value": 1000 * total / max(1, written),
            "embedding_ms_per_unit": 1000 * timed_write_s / max(1, written),
            "minilm_query_embed_ms_p50": _pct(query_ms, 50)}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000], metavar="UNITS",
                        help="history sizes to measure, in units of about 1,000 tokens (default: 100 1000 10000)")
    parser.add_argument("--renders", type=int, default=30, help="renders per size and mode")
    parser.add_argument("--budget", type=int, help="context budget of every render, in tokens "
                        "(default 8000; with --loop or --first-call 4000, the adapters' budget for a small model)")
    parser.add_argument("--modes", nargs="+", choices=registered_strategies(), default=list(DEFAULT_MODES),
                        metavar="MODE", help=f"recovery strategies to time (default: {' '.join(DEFAULT_MODES)}; "
                        f"registered: {', '.join(registered_strategies())})")
    parser.add_argument("--paths", nargs="*", choices=PATHS, default=list(PATHS), metavar="PATH",
                        help="host paths to time the default render through, each as its host passes the "
                        f"history ({', '.join(PATHS)}; default: all installed; none: --paths with no value)")
    parser.add_argument("--embed-sample", type=int, default=40,
                        help="units written with the real model to measure its cost (0: skip)")
    parser.add_argument("--store", default="memory://",
                        help="store URL to measure on (memory://, sqlite:///bench.db, postgresql://...)")
    parser.add_argument("--workers", metavar="PxT",
                        help="instead: a load test of P processes x T threads serving agent threads on --store "
                        "(e.g. 4x8 on postgresql://...): units lost or duplicated, requests over budget or unlike "
                        "one process's, render p50/p95")
    parser.add_argument("--agents", type=int, default=32, help="agent threads of the load test (default 32)")
    parser.add_argument("--steps", type=int, default=40, help="tool steps per agent thread of the load test "
                        "(default 40)")
    parser.add_argument("--loop", metavar="TRAJECTORIES",
                        help="instead: replay saved mini-swe-agent runs (.jsonl[.gz]) as agent loops through each "
                        "adapter with the real embedder, and report the memory's time per step beside truncation")
    parser.add_argument("--limit", type=int, default=50, help="runs the loop replays (default 50)")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between the loop's steps, standing for "
                        "the model call (default 1.0)")
    parser.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside the loop's second pass "
                        "(default 2; 0: idle only)")
    parser.add_argument("--busy-seconds", type=float, default=3600.0, help="longest a busy process runs")
    parser.add_argument("--busy-only", action="store_true", help="with --busy N: the loop's pass beside the busy "
                        "processes only, not the idle pass first")
    parser.add_argument("--loop-paths", nargs="+", choices=LOOP_PATHS, default=list(LOOP_PATHS), metavar="PATH",
                        help=f"adapters the loop goes through ({', '.join(LOOP_PATHS)}; default: both)")
    parser.add_argument("--first-call", metavar="TRAJECTORIES",
                        help="instead: time each adapter's first call over an existing history (saved "
                        "mini-swe-agent runs joined into one) with the real embedder, and what it logs meanwhile")
    parser.add_argument("--conversations", metavar="FILE",
                        help="with --first-call: also give LlamaIndex a conversation (a LoCoMo file's "
                        "conversations or a LongMemEval file's haystacks, joined)")
    parser.add_argument("--messages", type=int, nargs="+", default=[1000, 10000],
                        help="history sizes of --first-call, in messages (default 1000 10000)")
    parser.add_argument("--first-call-paths", nargs="+", choices=FIRST_CALL_PATHS, default=list(FIRST_CALL_PATHS),
                        metavar="PATH", help=f"adapters --first-call times ({', '.join(FIRST_CALL_PATHS)})")
    parser.add_argument("--out", help="also write the rows to this JSON file")


def scaling_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each mode and size after the smallest, its render p50 and p95 over those at the
    next smaller size of the same run (``history_ratio``: how many times the units grew), so
    "ten times the history costs at most k times the render" is read from one run."""
    timed: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in rows:
        if r["metric"] in ("render_ms_p50", "render_ms_p95") and "mode" in r:
            timed.setdefault((r["mode"], r["metric"]), {})[int(r["units"])] = r
    out = []
    for (mode, metric), by_size in timed.items():
        sizes = sorted(by_size)
        for smaller, units in zip(sizes, sizes[1:]):
            if by_size[smaller]["value"] > 0:
                out.append({"units": units, "mode": mode, "metric": f"{metric}_over_smaller",
                            "value": by_size[units]["value"] / by_size[smaller]["value"],
                            "history_ratio": units / smaller, "store": by_size[units].get("store", "")})
    return out


def _write_rows(rows: Sequence[dict[str, Any]], out: str | None) -> int:
    """Write ``rows`` as JSON to ``out`` when given; the exit status."""
    if out:
        with open(out, "w") as fh:
            json.dump(list(rows), fh, indent=1)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.budget is None:
        args.budget = 4000 if args.loop or args.first_call else 8000
    if args.workers:
        return run_workers(args)
    if args.first_call:
        return _write_rows(first_call_rows(args.first_call, args.messages, args.budget, args.first_call_paths,
                                           conversations=args.conversations), args.out)
    if args.loop:
        return _write_rows(loop_rows(args.loop, args.limit, args.budget, args.pause, args.busy, args.busy_seconds,
                                     args.loop_paths, idle=not args.busy_only), args.out)
    rows: list[dict[str, Any]] = []
    if args.embed_sample:
        rows.append(embedding_cost(args.embed_sample))
    for size in args.sizes:
        rows.extend(measure(size, args.renders, args.budget, HashingEmbedder(), args.store, args.modes, args.paths))
    rows.extend(scaling_rows(rows))
    print(f"store {args.store}\n{'units':>7} {'mode':>18}  {'metric':<40} {'value':>10}")
    for r in rows:
        print(f"{r['units']:>7} {r.get('mode', ''):>18}  {r['metric']:<40} {r['value']:>10.3f}")
        for extra in sorted(set(r) - {"units", "mode", "metric", "value", "store"}):
            value = r[extra]
            shown = f"{value:>10.3f}" if isinstance(value, (int, float)) else str(value)
            print(f"{r['units']:>7} {'':>18}  {extra:<40} {shown}")
    return _write_rows(rows, args.out)


def run_workers(args: argparse.Namespace) -> int:
    """``--workers PxT``: the load test of :mod:`flexamem_tools.bench_workers`; exit 1 when a
    unit was lost or duplicated, a request went over budget, or a call failed."""
    from .bench_workers import LoadPlan, run_load

    try:
        processes, threads = (int(x) for x in args.workers.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--workers takes PxT (processes x threads), e.g. 4x8; got {args.workers!r}") from None
    if args.store.startswith("memory:"):
        raise SystemExit("--workers needs a store other processes can open: --store sqlite:///load.db or "
                         "--store postgresql://...")
    plan = LoadPlan(args.store, processes, threads, args.agents, args.steps, args.budget,
                    run=f"load-{random.Random().randrange(1 << 30)}")
    got = run_load(plan)
    print(f"store {args.store.split(':', 1)[0]}, {processes} processes x {threads} threads, "
          f"{plan.agents} agent threads of {plan.steps} steps, budget {plan.budget}")
    for key, value in got.items():
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        print(f"  {key:<34} {shown}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({**got, "store": args.store.split(":", 1)[0], "budget": plan.budget, "steps": plan.steps}, fh,
                      indent=1)
    bad = got["errors"] or got["over_budget"] or got["units_lost"] or got["units_duplicated"]
    return 1 if bad else 0
