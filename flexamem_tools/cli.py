"""The ``flexamem`` command: each subcommand lives in its own module, imported on use.

A subcommand module exposes ``configure(parser)`` and ``run(args) -> int``. The core's own
(``demo``, ``bench``) are listed here; the others are found through the
``flexamem.commands`` entry points of the installed packages (``eval`` from the evaluation
harness, ``replay`` from the mini-swe-agent adapter), so the core names no adapter. Only the
chosen module is imported, which keeps ``flexamem --help`` fast and extras optional; the
help line of the others is their module docstring's first line, read without importing them.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path

GROUP = "flexamem.commands"

CORE: dict[str, str] = {
    "demo": "flexamem_tools.demo",
    "bench": "flexamem_tools.bench",
}


def commands() -> dict[str, str]:
    """Subcommand name -> module: the core's, then every installed ``flexamem.commands`` entry point."""
    found = dict(CORE)
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep.value.split(":", 1)[0])
    return found


def module_source(module_name: str) -> Path | None:
    """The ``.py`` file of a module, found from its top-level package only: ``find_spec`` of
    ``pkg.mod`` would import ``pkg`` (for the evaluation harness, seconds of imports)."""
    top, *rest = module_name.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    for root in spec.submodule_search_locations or ():
        for candidate in (Path(root, *rest).with_suffix(".py"), Path(root, *rest, "__init__.py")):
            if candidate.is_file():
                return candidate
    return None


def help_line(module_name: str) -> str:
    """The module's ``HELP`` string, else its docstring's first line, parsed from its source
    (nothing is imported)."""
    try:
        source = module_source(module_name)
        if source is None:
            return module_name
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (ImportError, OSError, SyntaxError, ValueError):
        return module_name
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HELP" for t in node.targets) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    doc = (ast.get_docstring(tree) or module_name).strip()
    return doc.splitlines()[0] if doc else module_name


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="flexamem", description="FlexA-Mem memory for LLM agents")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, module_name in commands().items():
        text = help_line(module_name)
        sp = sub.add_parser(name, help=text, description=text)
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
