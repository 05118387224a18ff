"""``flexamem eval DATASET [--data PATH] [--budgets ...] [--methods ...] [--out DIR]``.

Without ``--data`` the small sample of DATASET that ships with the package is evaluated
(:func:`flexamem_eval.datasets.sample_path`), at budgets sized to it unless ``--budgets`` is given."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .datasets import DATASETS, DatasetError, sample_path
from .evaluate import EvalError, evaluate_to_dir
from .methods import METHODS

HELP = "evaluate memories on LongMemEval, LoCoMo or agent trajectories (a bundled sample without --data)"

#: Budgets of a run without ``--data``: the bundled histories hold 5k to 15k tokens, so at the
#: usual 4000 8000 most of a history would fit and every method would show nearly everything.
SAMPLE_BUDGETS = (2000, 4000)
DATA_BUDGETS = (4000, 8000)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", choices=DATASETS,
                        help="upstream format of --data; without --data, the small sample of it bundled with flexamem")
    parser.add_argument("--data", default=None, metavar="PATH",
                        help="the benchmark to run: a file (.json/.jsonl/.jsonl.gz/.traj.json) or folder in the "
                             "upstream format of DATASET (default: the bundled sample, a few invented histories)")
    parser.add_argument("--budgets", type=int, nargs="+", default=None, metavar="B",
                        help="context budgets in tokens (default: 4000 8000; without --data 2000 4000, "
                             "sized to the sample)")
    parser.add_argument("--methods", nargs="+", default=None, metavar="M",
                        help=f"methods to compare (default: all): {', '.join(METHODS)}")
    parser.add_argument("--limit", type=int, default=None,
                        help="N questions (LoCoMo: spread over its conversations) or N trajectories")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads per process (default: cores / workers with several workers, "
                             "else torch's default; use 1 on a machine shared with other jobs)")
    parser.add_argument("--out", default=None, help="output folder for results.json/.md and plots "
                        "(default: flexamem-eval-DATASET in the current folder)")
    parser.add_argument("--near", type=int, default=2, metavar="N",
                        help="trajectories: a reused detail is near when one of the N observations before "
                             "its action holds it, else far (reused_detail_recall_near / _far; default 2)")
    parser.add_argument("--dump", action="store_true", help="also write every rendered context to renders.jsonl")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
                        help="a FlexAMemConfig setting for every FlexA-Mem method (repeatable), e.g. "
                             "--set piece_vectors=true --set fusion=bm25; values are read as JSON, else text")
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--embedding-cache", metavar="DIR", default=None,
                       help=f"directory of the on-disk embedding cache (default: {_default_cache()})")
    cache.add_argument("--no-embedding-cache", action="store_true",
                       help="embed every text afresh, read and write no cache")


def _default_cache() -> str:
    from .embedding_cache import default_cache_dir

    return str(default_cache_dir()).replace(str(Path.home()), "~", 1)


def run(args: argparse.Namespace) -> int:
    if args.workers < 1 or (args.threads is not None and args.threads < 1):
        print("flexamem eval: error: --workers and --threads must be at least 1", file=sys.stderr)
        return 2
    cache: str | bool = False if args.no_embedding_cache else (args.embedding_cache or True)
    try:
        config = parse_settings(args.settings)
    except ValueError as exc:
        print(f"flexamem eval: error: {exc}", file=sys.stderr)
        return 2
    data, budgets = args.data, args.budgets or list(DATA_BUDGETS)
    if data is None:
        data, budgets = sample_path(args.dataset), args.budgets or list(SAMPLE_BUDGETS)
        print(f"flexamem eval: no --data: running on the small {args.dataset} sample bundled with flexamem "
              f"({data}), budgets {' '.join(map(str, budgets))}; --data PATH runs the real benchmark",
              file=sys.stderr)
    out = args.out or f"flexamem-eval-{args.dataset}"
    stats: dict = {"load_before": _load(), "settings": config, "data": str(data)}
    try:
        paths = evaluate_to_dir(args.dataset, data, budgets=budgets, methods=args.methods,
                                out=out, limit=args.limit, workers=args.workers, dump=args.dump,
                                progress=not args.quiet, threads=args.threads, embedding_cache=cache,
                                stats=stats, config=config, near=args.near)
    except (DatasetError, EvalError) as exc:
        print(f"flexamem eval: error: {exc}", file=sys.stderr)
        return 2
    stats["load_after"] = _load()
    run_path = Path(out) / "run.json"
    run_path.write_text(json.dumps(stats, indent=1), encoding="utf-8")
    for p in [*paths, run_path]:
        print(p)
    for name, why in stats.get("skipped", {}).items():
        print(f"flexamem eval: {name} skipped: {why}", file=sys.stderr)
    print(f"flexamem eval: {stats['items']} items in {stats['seconds']:.0f} s; embeddings: "
          f"{stats['embeddings_cached']:,} from the cache, {stats['embeddings_computed']:,} computed"
          + (f" (cache {stats['embedding_cache']})" if stats["embedding_cache"] else " (no cache)"),
          file=sys.stderr)
    return 0


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as config settings, each checked by :class:`FlexAMemConfig` (so a
    typo or a bad value is an error here, not a silently ignored option)."""
    from pydantic import ValidationError

    from flexamem_core import FlexAMemConfig
    from flexamem_core.config import TUNING_FIELDS

    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().removeprefix("tuning.")
        if not sep or not key:
            raise ValueError(f"--set expects KEY=VALUE, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if key in TUNING_FIELDS:  # a hyperparameter, with or without its "tuning." prefix
            out.setdefault("tuning", {})[key] = value
        else:
            out[key] = value
    try:
        FlexAMemConfig(**out)
    except ValidationError as exc:
        raise ValueError(f"--set: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    return out


def _load() -> list[float] | None:
    """The machine's 1, 5 and 15 minute load averages (what else was running), where known."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
