"""How many torch threads the embedder should use for the small inputs of an agent's step,
on an idle machine and beside CPU-bound processes (benchmark, not a test).

An agent step embeds a query (one text) and, when a unit completes, its note (and, for a
conversation, its pieces); a first call over a long history embeds batches of 16 units'
notes. torch's default is one thread per core, which suits a large batch on an idle machine;
on a machine shared with other work (a batch of SWE-bench agents, an agent server) its
threads wait for each other. This script times
:class:`~flexamem_core.index.embeddings.SentenceTransformerEmbedder` on each input with
``threads=1``, with torch's own count (``threads=None`` on inputs larger than the small-input
bound is the same) and with the default (sized by the input), first alone and then with
``--busy`` CPU-bound processes running beside it (each stops after ``--seconds`` at most).
Settings alternate per input, so the load each meets is the same; texts are new each time
(the embedder caches by content).

    HF_HUB_OFFLINE=1 python tests/benchmarks/bench_embed_threads.py --busy 2 --inputs 20
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from flexamem_tools.bench_loop import busy_processes

WORDS = ("ls", "cd", "grep", "def", "class", "return", "import", "pytest", "error", "django/db/models/query.py",
         "the", "file", "test", "fails", "because", "a", "value", "is", "missing", "in", "config", "line", "42")
#: (name, texts, words per text): a query, one completed unit's note and pieces, and a batch of a
#: catch-up (16 units' notes).
INPUTS = (("query", 1, 150), ("unit", 6, 60), ("catch-up batch", 16, 60))


def texts(rng: np.random.Generator, n: int, words: int) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=words)) for _ in range(n)]


def measure(inputs: int, seed: int) -> dict[str, dict[str, float]]:
    """Per setting and input kind: p50, mean, p95 and max milliseconds over ``inputs`` inputs."""
    import torch

    from flexamem_core.index.embeddings import SentenceTransformerEmbedder

    settings = {"one thread": 1, f"torch's count ({torch.get_num_threads()})": torch.get_num_threads(),
                "default (sized by the input)": None}
    embedders = {name: SentenceTransformerEmbedder(threads=n) for name, n in settings.items()}
    for e in embedders.values():
        e.load()
    rng = np.random.default_rng(seed)
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(inputs):
        for kind, n, words in INPUTS:
            for name, e in embedders.items():
                batch = texts(rng, n, words)
                t0 = time.perf_counter()
                e.embed(batch)
                times.setdefault((name, kind), []).append(1000 * (time.perf_counter() - t0))
    return {f"{name} / {kind}": {"p50": float(np.percentile(v, 50)), "mean": float(np.mean(v)),
                                 "p95": float(np.percentile(v, 95)), "max": float(np.max(v))}
            for (name, kind), v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=2, help="CPU-bound processes beside the second run")
    ap.add_argument("--inputs", type=int, default=20, help="inputs of each kind per setting and run")
    ap.add_argument("--seconds", type=float, default=600.0, help="longest a busy process runs")
    args = ap.parse_args()
    out = {"cores": os.cpu_count(), "idle": measure(args.inputs, 0)}
    with busy_processes(args.busy, args.seconds):
        out[f"beside {args.busy} CPU-bound processes"] = measure(args.inputs, 1)
    for run, rows in out.items():
        if not isinstance(rows, dict):
            continue
        print(f"\n{run} (ms per input)")
        for name, r in rows.items():
            print(f"  {name:48s} p50 {r['p50']:7.1f}  mean {r['mean']:7.1f}  p95 {r['p95']:7.1f}  max {r['max']:7.1f}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
