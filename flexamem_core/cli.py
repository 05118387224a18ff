"""The ``flexamem`` command: each subcommand lives in its own module, imported on use.

A subcommand module exposes ``configure(parser)`` and ``run(args) -> int``; importing only
the chosen one keeps ``flexamem --help`` fast and lets optional extras stay optional.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("flexamem_core.demo", "replay a long agent run and a long chat at two budgets (offline)"),
    "bench": ("flexamem_core.bench", "measure render latency and write cost at 100/1,000/10,000 units"),
    "eval": ("flexamem_eval.cli", "evaluate memories on LongMemEval, LoCoMo or agent trajectories"),
    "replay": ("flexamem_minisweagent.replay", "render a saved mini-swe-agent .traj.json step by step"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="flexamem", description="FlexA-Mem memory for LLM agents")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                parser.error(f"'{name}' needs an optional extra that is not installed: {exc}")
            module.configure(sp)
            sp.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    return int(args._run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
