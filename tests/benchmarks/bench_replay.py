"""``flexamem replay`` against the live wrapper on the same runs (a script, not a test).

    HF_HUB_OFFLINE=1 python tests/benchmarks/bench_replay.py \\
        ../shared/data/trajectories/mini_swe_agent_gemini3pro_dev200.jsonl.gz --limit 10 --budget 8000

For each saved run it times ``replay`` (every model call's history rendered in order, as
``flexamem replay`` does) and the live wrapper making the same calls
(``FlexAMemModel.render`` on the history before each call, as an agent loop would), each with
a fresh memory and the embedding model already loaded, in the same process. The figure that
matters is the ratio replay / live: replay should cost what the live run's memory cost.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from functools import partial

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

from flexamem_minisweagent import FlexAMemModel
from flexamem_minisweagent.replay import replay
from flexamem_minisweagent.settings import FlexAMemSettings
from flexamem_minisweagent.trajectory import load_trajectories, model_calls
from minisweagent.models.test_models import DeterministicModel

from flexamem_core import FlexAMem
from flexamem_core.index.embeddings import default_embedder


def _time(embedder, fn) -> float:
    """Seconds ``fn`` takes, the embedder's cache of texts emptied first so each side embeds
    what it writes (the model stays loaded)."""
    embedder._cache.clear()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _live(model: FlexAMemModel, messages: list, calls: list[int]) -> None:
    """The live wrapper's render before every model call of the run, in order."""
    for index in calls:
        model.render(messages[:index])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a .traj.json or a .jsonl[.gz] of trajectories")
    parser.add_argument("--limit", type=int, default=10, help="runs to time (default 10)")
    parser.add_argument("--budget", type=int, default=8000, help="context budget in tokens (default 8000)")
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args()
    embedder = default_embedder()
    embedder.embed(["warm up"])
    rows = []
    for trajectory in load_trajectories(args.data)[: args.limit]:
        messages = trajectory["messages"]
        calls = model_calls(messages)
        settings = FlexAMemSettings()
        replayed = FlexAMem(settings.core_config(args.budget), embedder=embedder)
        replay_s = _time(embedder, partial(replay, trajectory, args.budget, tool_tokens=0, memory=replayed))
        live = FlexAMemModel(inner=DeterministicModel(outputs=[]), flexamem={"budget": args.budget,
                                                                            "tool_schema_tokens": 0},
                             memory=FlexAMem(settings.core_config(args.budget), embedder=embedder))
        live_s = _time(embedder, partial(_live, live, messages, calls))
        rows.append({"instance_id": trajectory.get("instance_id"), "calls": len(calls), "replay_s": replay_s,
                     "live_s": live_s, "replay_over_live": replay_s / live_s})
        print(f"{rows[-1]['instance_id']:<40} {len(calls):>4} calls  replay {replay_s:6.2f} s  "
              f"live {live_s:6.2f} s  ratio {replay_s / live_s:.2f}")
    total_replay, total_live = sum(r["replay_s"] for r in rows), sum(r["live_s"] for r in rows)
    print(f"{'all':<40} {sum(r['calls'] for r in rows):>4} calls  replay {total_replay:6.2f} s  "
          f"live {total_live:6.2f} s  ratio {total_replay / total_live:.2f}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"budget": args.budget, "runs": rows, "replay_over_live": total_replay / total_live}, fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
