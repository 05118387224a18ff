"""``flexamem bench``: render latency and write cost at 100, 1,000 and 10,000 units.

Everything is measured in one run and reported next to a baseline from the same run:
re-tokenizing the whole history once, which is what a memory that rescans the history
on every call would pay at least. Query embedding is timed separately from rendering.
Building 10,000 units with the neural embedder would take most of an hour on 2 cores,
so the large stores are written with the model-free hashing embedder and the real
model's cost per unit is measured on a sample and reported on its own line.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from .config import FlexAMemConfig
from .embeddings import HashingEmbedder, default_embedder
from .memory import FlexAMem
from .messages import Message, ToolCall
from .protocols import Embedder
from .tokens import default_tokenizer


class TimedEmbedder:
    """Delegates to an embedder and keeps the time spent in it (to time renders without it)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.seconds = 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - t0


def synthetic_history(units: int, seed: int = 0) -> list[Message]:
    """An agent run of about ``units`` units of ~1,000 tokens (4 tool steps each)."""
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


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0


def measure(size: int, renders: int, budget: int, embedder: Embedder, store_url: str = "memory://"
            ) -> list[dict[str, Any]]:
    """Write a store of ``size`` units, then time renders in both modes as the run grows."""
    from .stores.url import open_store

    tk = default_tokenizer()
    history = synthetic_history(size + renders // 4 + 2, seed=size)
    cut = 2 + size * 8  # messages in the first `size` units
    rows = []
    timed = TimedEmbedder(embedder)
    store = open_store(store_url)
    namespace = f"bench-{size}-{random.Random().randrange(1 << 30)}"  # a fresh namespace in a shared store
    mem = FlexAMem(FlexAMemConfig(budget=budget), store=store, tokenizer=tk, embedder=timed)
    t0 = time.perf_counter()
    with tqdm(total=size, desc=f"writing {size} units", unit="unit", leave=False) as bar:
        written = mem.ingest(history[:cut], namespace=namespace, progress=bar)
    write_s = time.perf_counter() - t0
    embed_s = timed.seconds
    t0 = time.perf_counter()
    for m in history[:cut]:
        tk._cache.pop(m.text, None) if hasattr(tk, "_cache") else None
        tk.count(m.text)
    rescan_ms = 1000 * (time.perf_counter() - t0)
    rows.append({"units": size, "metric": "write_ms_per_unit_without_embedding",
                 "value": 1000 * (write_s - embed_s) / max(1, written)})
    rows.append({"units": size, "metric": "baseline_full_retokenize_ms", "value": rescan_ms})
    for mode in ("unit", "piece"):
        piece_mem = mem if mode == "unit" else FlexAMem(FlexAMemConfig(budget=budget, mode="piece"), store=mem.store,
                                                        tokenizer=tk, embedder=timed)
        render_ms, embed_ms = [], []
        for r in range(renders):
            hist = history[: cut + 2 * (r + 1)]
            before = timed.seconds
            t0 = time.perf_counter()
            piece_mem.render(hist, namespace=namespace)
            total = time.perf_counter() - t0
            spent = timed.seconds - before
            embed_ms.append(1000 * spent)
            render_ms.append(1000 * (total - spent))
        render_ms = render_ms[1:] or render_ms  # the first call builds the namespace index
        for name, vals in (("render_ms", render_ms), ("query_embed_ms", embed_ms)):
            rows.append({"units": size, "mode": mode, "metric": f"{name}_p50", "value": _pct(vals, 50)})
            rows.append({"units": size, "mode": mode, "metric": f"{name}_p95", "value": _pct(vals, 95)})
        rows.append({"units": size, "mode": mode, "metric": "render_p50_over_full_retokenize",
                     "value": statistics.median(render_ms) / max(rescan_ms, 1e-9)})
    t0 = time.perf_counter()
    reopened = FlexAMem(FlexAMemConfig(budget=budget), store=store, tokenizer=tk, embedder=timed)
    reopened.render(history[: cut + 2 * renders], namespace=namespace)
    rows.append({"units": size, "metric": "open_and_first_render_ms", "value": 1000 * (time.perf_counter() - t0)})
    for row in rows:
        row["store"] = store_url.split(":", 1)[0]
    return rows


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
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--renders", type=int, default=30, help="renders per size and mode")
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--embed-sample", type=int, default=40,
                        help="units written with the real model to measure its cost (0: skip)")
    parser.add_argument("--store", default="memory://",
                        help="store URL to measure on (memory://, sqlite:///bench.db, postgresql://...)")
    parser.add_argument("--out", help="also write the rows to this JSON file")


def run(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    if args.embed_sample:
        rows.append(embedding_cost(args.embed_sample))
    for size in args.sizes:
        rows.extend(measure(size, args.renders, args.budget, HashingEmbedder(), args.store))
    print(f"store {args.store}\n{'units':>6} {'mode':>6}  {'metric':<40} {'value':>10}")
    for r in rows:
        print(f"{r['units']:>6} {r.get('mode', ''):>6}  {r['metric']:<40} {r['value']:>10.3f}")
        for extra in sorted(set(r) - {"units", "mode", "metric", "value", "store"}):
            print(f"{r['units']:>6} {'':>6}  {extra:<40} {r[extra]:>10.3f}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0
