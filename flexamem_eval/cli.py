"""``flexamem eval DATASET --data PATH --budgets ... --methods ... --out DIR``."""

from __future__ import annotations

import argparse
import sys

from .datasets import DATASETS, DatasetError
from .evaluate import EvalError, evaluate_to_dir
from .methods import METHODS

HELP = "evaluate memories on LongMemEval, LoCoMo or agent trajectories"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dataset", choices=DATASETS, help="upstream format of --data")
    parser.add_argument("--data", required=True, help="file (.json/.jsonl/.jsonl.gz/.traj.json) or folder")
    parser.add_argument("--budgets", type=int, nargs="+", default=[4000, 8000], metavar="B",
                        help="context budgets in tokens (default: 4000 8000)")
    parser.add_argument("--methods", nargs="+", default=None, metavar="M",
                        help=f"methods to compare (default: all): {', '.join(METHODS)}")
    parser.add_argument("--limit", type=int, default=None,
                        help="N questions (LoCoMo: spread over its conversations) or N trajectories")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads per process (default: cores / workers with several workers, "
                             "else torch's default; use 1 on a machine shared with other jobs)")
    parser.add_argument("--out", required=True, help="output folder for results.json/.md and plots")
    parser.add_argument("--dump", action="store_true", help="also write every rendered context to renders.jsonl")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    if args.workers < 1 or (args.threads is not None and args.threads < 1):
        print("flexamem eval: error: --workers and --threads must be at least 1", file=sys.stderr)
        return 2
    try:
        paths = evaluate_to_dir(args.dataset, args.data, budgets=args.budgets, methods=args.methods,
                                out=args.out, limit=args.limit, workers=args.workers, dump=args.dump,
                                progress=not args.quiet, threads=args.threads)
    except (DatasetError, EvalError) as exc:
        print(f"flexamem eval: error: {exc}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0
