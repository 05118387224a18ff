"""Time `flexamem eval` on all three dev splits with the default methods (benchmark, not a test).

Runs LongMemEval_S dev (60 questions, budgets 4k/8k), LoCoMo dev (4 conversations, all 757
questions, budgets 2k/4k/8k) and the 100 dev trajectories (4k/8k) one after the other, each
as its own ``flexamem eval`` process, and writes ``timings.json`` under ``--root``: wall
seconds per dataset and in total, each run's ``run.json`` (items, embeddings taken from the
cache and computed, seconds per method) and the machine's load averages sampled every 30 s
(the machine may be shared; the load says how much of it the run had).

    # cold: an empty cache; warm: run again with the same --cache
    HF_HUB_OFFLINE=1 python tests/benchmarks/bench_eval_full.py --root /tmp/eval_full_cold --cache /tmp/emb
    HF_HUB_OFFLINE=1 python tests/benchmarks/bench_eval_full.py --root /tmp/eval_full_warm --cache /tmp/emb
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
RUNS = {
    "longmemeval": (DATA / "longmemeval" / "longmemeval_s_dev60.jsonl.gz", [4000, 8000]),
    "locomo": (DATA / "locomo" / "locomo10_dev.json", [2000, 4000, 8000]),
    "trajectories": (DATA / "trajectories" / "mini_swe_agent_gemini3pro_dev100.jsonl.gz", [4000, 8000]),
}


def _children_cpu() -> float:
    """User + system seconds of every finished child process (and theirs)."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="one results folder per dataset under it, and timings.json")
    parser.add_argument("--cache", required=True, help="embedding cache directory (empty for a cold run)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--datasets", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--limit", type=int, default=None, help="pass --limit to every run (a quick check)")
    args = parser.parse_args()
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    loads: list[dict] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            loads.append({"t": round(time.time(), 1), "load": [round(x, 2) for x in os.getloadavg()]})
            stop.wait(30)

    threading.Thread(target=sample, daemon=True).start()
    timings: dict = {"workers": args.workers, "threads": args.threads, "cpus": os.cpu_count(), "runs": {}}
    start = time.time()
    for name in args.datasets:
        data, budgets = RUNS[name]
        out = root / name
        cmd = [sys.executable, "-m", "flexamem_tools.cli", "eval", name, "--data", str(data), "--budgets",
               *map(str, budgets), "--workers", str(args.workers), "--threads", str(args.threads),
               "--out", str(out), "--embedding-cache", args.cache, "--quiet"]
        if args.limit:
            cmd += ["--limit", str(args.limit)]
        t0, cpu0 = time.time(), _children_cpu()
        subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        run = json.loads((out / "run.json").read_text())
        # CPU seconds of the run and its workers: what it costs whatever else shares the machine.
        timings["runs"][name] = {"wall_s": round(time.time() - t0, 1), "cpu_s": round(_children_cpu() - cpu0, 1),
                                 **run}
        print(f"{name}: {timings['runs'][name]['wall_s']:.0f} s ({timings['runs'][name]['cpu_s']:.0f} CPU s), "
              f"{run['embeddings_computed']:,} embedded, "
              f"{run['embeddings_cached']:,} from the cache, load {run['load_before']} -> {run['load_after']}",
              flush=True)
        timings["total_s"] = round(time.time() - start, 1)
        timings["loads"] = loads
        (root / "timings.json").write_text(json.dumps(timings, indent=1))
    stop.set()
    mean = [round(sum(x["load"][0] for x in loads) / max(1, len(loads)), 2)]
    timings["load_1min_mean"] = mean[0]
    timings["total_cpu_s"] = round(sum(r["cpu_s"] for r in timings["runs"].values()), 1)
    (root / "timings.json").write_text(json.dumps(timings, indent=1))
    print(f"total {timings['total_s']:.0f} s ({timings['total_cpu_s']:.0f} CPU s), mean 1-minute load {mean[0]} "
          f"on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
