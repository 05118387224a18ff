"""Where the default's uncached tokens come from, by the kind of call (a script, not a test).

    python tests/benchmarks/bench_cache_breakdown.py \
        ../shared/data/trajectories/mini_swe_agent_gemini3pro_dev100.jsonl.gz --budget 8000

Drives ``FlexAMem`` over each trajectory exactly as ``flexamem eval trajectories`` drives
``flexamem-auto`` (render before every model call, the same prompt-cache meter, only calls
whose history exceeds B_bar counted) and splits the uncached tokens of those calls by the
cache-stable step each call took (``report["cache"]["step"]``: append, extend, or render,
with each trajectory's first render past the budget apart), then each kind into the new step
(inherent: :mod:`flexamem_eval.cache_bounds`) and the rest, which the call sent again.
``--set key=value`` changes a config field, as in ``flexamem eval``.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from flexamem_core import FlexAMem, FlexAMemConfig, InMemoryStore, RuleRecordWriter
from flexamem_core.host import config_for_budget
from flexamem_eval.actions import trajectory_targets
from flexamem_eval.cli import parse_settings
from flexamem_eval.datasets import load
from flexamem_eval.evaluate import cache_dir
from flexamem_eval.metrics import score_step
from flexamem_eval.runner import PrefixMeter, Spec, _env, limit_threads


def one(item: Any, budget: int, settings: dict[str, Any]) -> dict[str, list[int]]:
    """Per kind of call: [calls, tokens, uncached, uncached new-step tokens, reused hits, reused]."""
    limit_threads(1)
    env = _env(Spec(dataset="trajectories", budgets=(), methods=(), config={}, embedding_cache=cache_dir(True)))
    settings = {**env.config.model_dump(exclude_unset=True), "mode": "auto", "history": "agent", **settings}
    cfg = config_for_budget(budget, FlexAMemConfig(**settings))  # as the evaluation and the adapters size it
    mem = FlexAMem(cfg, store=InMemoryStore(), tokenizer=env.tokenizer, embedder=env.embedder,
                   writer=RuleRecordWriter(cfg.tuning.record_words, cfg.tuning.merged_record_words))
    meter = PrefixMeter(env)
    limit = env.effective(budget)
    out: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    previous_length, first = None, True
    for target in trajectory_targets(item.messages):
        history = list(item.messages[: target.message_index])
        mem.ingest(history, namespace="item", final=False)
        rendered = mem.render(history, namespace="item", budget=budget)
        tokens = env.count(rendered.messages)
        cached = meter.add(rendered.messages, tokens)
        new = env.count(history[previous_length:]) - 3 if previous_length else 0
        previous_length = len(history)
        if env.count(history) <= limit:
            continue
        step = rendered.report.get("cache", {}).get("step", "render")
        if step == "render" and first:
            step = "first render"
        first = False
        res = score_step(env.context_text(rendered.messages), target)
        row = out[step]
        for k, v in enumerate((1, tokens, tokens - cached, min(new, tokens - cached), res.reused_hits,
                               res.reused_total)):
            row[k] += v
    return dict(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="mini-swe-agent trajectories (.traj.json, a folder, or .jsonl(.gz))")
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--limit", type=int, default=None, help="the first N trajectories only")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a config field (JSON value), e.g. --set stable_target=0.5")
    args = parser.parse_args()
    settings = parse_settings(args.set)  # as `flexamem eval --set` reads them, validated
    items = load("trajectories", args.data, args.limit)
    total: dict[str, list[int]] = defaultdict(lambda: [0] * 6)
    with ProcessPoolExecutor(args.workers) as pool:
        for got in pool.map(one, items, [args.budget] * len(items), [settings] * len(items)):
            for step, row in got.items():
                total[step] = [a + b for a, b in zip(total[step], row)]
    calls = sum(r[0] for r in total.values())
    tokens = sum(r[1] for r in total.values())
    uncached = sum(r[2] for r in total.values())
    hits, reused = sum(r[4] for r in total.values()), sum(r[5] for r in total.values())
    print(f"budget {args.budget}, {len(items)} trajectories, {calls:,} calls: cached "
          f"{100 * (1 - uncached / max(1, tokens)):.1f}%, cost per call "
          f"{(0.1 * (tokens - uncached) + 1.25 * uncached) / max(1, calls):,.0f}, reused detail "
          f"{100 * hits / max(1, reused):.1f}")
    print("| call | calls | uncached | of it the new step | the rest (per call) |")
    print("|---|---|---|---|---|")
    for step, (n, _, unc, new, _, _) in sorted(total.items()):
        print(f"| {step} | {n:,} | {unc:,} | {new:,} | {unc - new:,} ({(unc - new) / max(1, n):,.0f}) |")


if __name__ == "__main__":
    main()
