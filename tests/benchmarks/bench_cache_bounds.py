"""What prompt caching allows at all on a set of trajectories (a script, not a test).

    python tests/benchmarks/bench_cache_bounds.py \
        ../shared/data/trajectories/mini_swe_agent_gemini3pro_dev100.jsonl.gz --budgets 4000 8000

Any request that keeps the system message and the task and shows each new step verbatim pays
for that step as new tokens, so over the calls ``flexamem eval trajectories`` measures there
is a floor under the cost per call and a ceiling over the cached share, whatever a method does
with the rest of its room (:mod:`flexamem_eval.cache_bounds`).

``truncation`` is run through ``flexamem eval`` in the same process (no model), so the floor
can be read against the issue's targets (cost at most 0.7 times truncation's, 90% cached).
Writes the figures as JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from flexamem_core.config import FlexAMemConfig
from flexamem_core.request.tokens import default_tokenizer
from flexamem_eval import evaluate
from flexamem_eval.cache_bounds import cache_bounds
from flexamem_eval.datasets import load
from flexamem_eval.methods.base import Env


def bounds(path: str, budgets: list[int], limit: int | None = None) -> list[dict]:
    """Per budget: the measured calls, mean fixed prompt and new step, and both bounds."""
    env = Env(tokenizer=default_tokenizer(), config=FlexAMemConfig())
    runs = [item.messages for item in load("trajectories", path, limit)]
    return [asdict(cache_bounds(env, runs, budget)) for budget in budgets]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="mini-swe-agent trajectories (.traj.json, a folder, or .jsonl(.gz))")
    parser.add_argument("--budgets", type=int, nargs="+", default=[4000, 8000])
    parser.add_argument("--limit", type=int, default=None, help="the first N trajectories only")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = bounds(args.data, args.budgets, args.limit)
    trunc = evaluate("trajectories", args.data, budgets=args.budgets, methods=["truncation"], limit=args.limit,
                     embedding_cache=False)
    cost = {r["budget"]: r["value"] for r in trunc if r["metric"] == "cost_per_call"}
    share = {r["budget"]: r["value"] for r in trunc if r["metric"] == "cached_prefix_share"}
    print("| budget | calls | fixed prompt | new step | cost floor | truncation's cost | floor / truncation "
          "| 0.7 x truncation | cached share ceiling | truncation's share |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        r["truncation_cost"], r["truncation_share"] = cost.get(r["budget"]), share.get(r["budget"])
        ratio = r["cost_floor"] / r["truncation_cost"] if r["cost_floor"] and r["truncation_cost"] else None
        r["floor_over_truncation"] = ratio
        print(f"| {r['budget']:,} | {r['calls']:,} | {r['fixed_mean']:,.0f} | {r['new_step_mean']:,.0f} "
              f"| {r['cost_floor']:,.0f} | {r['truncation_cost']:,.0f} | {ratio:.2f} "
              f"| {0.7 * r['truncation_cost']:,.0f} | {100 * r['cached_share_ceiling']:.1f}% "
              f"| {100 * r['truncation_share']:.1f}% |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
