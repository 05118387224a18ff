"""What a question over a long conversation costs: the render with its query's embedding, and
the write per conversation turn (benchmark, not a test).

``flexamem eval`` times renders with the embedding cache it shares across runs, so a
question's vector is usually read from disk there. Here each LongMemEval_S history is
ingested as ``flexamem eval`` does (``mode="auto"``, one store per history; vectors from the
disk cache, so the run takes minutes, not hours), then every question is rendered at each
budget with the real model and an empty in-process cache: the time includes embedding the
question, as a user's first call with that question pays it; only the first budget listed pays
it (the memory keeps the vector of the texts it embedded last, so the same question at another
budget reuses it): list the budget to measure first. The write cost per turn is
measured apart, on the first ``--write-sample`` histories ingested again with the model and no
cache at all (what a user's ingestion costs on this machine).

    HF_HUB_OFFLINE=1 python tests/benchmarks/bench_conversation_latency.py \\
        ../shared/data/longmemeval/longmemeval_s_dev200.jsonl.gz --budgets 8000 4000 --write-sample 5
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _stats(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"n": len(a), "p50": float(np.percentile(a, 50)), "mean": float(a.mean()),
            "p95": float(np.percentile(a, 95)), "max": float(a.max())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="LongMemEval_S JSONL(.gz)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions only")
    parser.add_argument("--budgets", type=int, nargs="+", default=[8000])
    parser.add_argument("--write-sample", type=int, default=5, help="histories ingested with the model, uncached")
    parser.add_argument("--cache", default=None, help="embedding cache directory (flexamem eval's by default)")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()

    from flexamem_core import FlexAMem, FlexAMemConfig
    from flexamem_core.index.embeddings import SentenceTransformerEmbedder
    from flexamem_eval.datasets import load
    from flexamem_eval.embedding_cache import CachedEmbedder, default_cache_dir

    items = load("longmemeval", args.data, args.limit)
    model = SentenceTransformerEmbedder()
    model.load()
    cached = CachedEmbedder(model, args.cache or default_cache_dir())
    config = FlexAMemConfig(history="reader", mode="auto")
    render_ms: dict[int, list[float]] = {b: [] for b in args.budgets}
    over: dict[int, int] = {b: 0 for b in args.budgets}
    turns = 0
    for item in items:
        mem = FlexAMem(config, embedder=cached)
        mem.ingest(item.history, final=True)
        turns += len(item.history)
        mem._embedder = model  # the render's query goes to the model, its in-process cache emptied
        for question in item.questions:
            for budget in args.budgets:
                model._cache.clear()
                t0 = time.perf_counter()
                out = mem.render_question(question.text, budget=budget)
                render_ms[budget].append(1000 * (time.perf_counter() - t0))
                over[budget] += out.tokens > budget
    write_ms, write_turns, write_units = 0.0, 0, 0
    for item in items[: args.write_sample]:
        model._cache.clear()
        mem = FlexAMem(config, embedder=model)
        t0 = time.perf_counter()
        write_units += mem.ingest(item.history, final=True)
        write_ms += 1000 * (time.perf_counter() - t0)
        write_turns += len(item.history)
    result = {
        "questions": len(items), "turns_per_history": turns / max(1, len(items)),
        "render_ms_with_query_embedding": {str(b): _stats(v) for b, v in render_ms.items()},
        "over_budget": {str(b): n for b, n in over.items()},
        "write": {"histories": min(args.write_sample, len(items)), "turns": write_turns, "units": write_units,
                  "ms_per_turn": write_ms / max(1, write_turns), "ms_per_unit": write_ms / max(1, write_units)},
        "load": os.getloadavg(),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
