"""The shape of the code, checked: the core's layers and the sizes that keep it readable.

The import contracts live in ``pyproject.toml`` (``[tool.importlinter]``); this runs them the
way ``lint-imports`` does, so the README's test command enforces them too.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import flexamem_core
from flexamem_core import FlexAMemConfig

ROOT = Path(__file__).resolve().parents[1]
CORE = Path(flexamem_core.__file__).parent


def test_the_import_contracts_hold() -> None:
    env_path = f"{ROOT}:{ROOT / 'integrations'}"
    out = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports; "
                          "import sys; sys.exit(lint_imports(no_cache=True))"],
                         cwd=ROOT, capture_output=True, text=True, env={"PYTHONPATH": env_path, "PATH": ""})
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(f"{path.relative_to(CORE)}:{node.lineno} {node.name}", node.end_lineno - node.lineno + 1)
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def test_no_function_in_the_core_is_over_50_lines() -> None:
    long = [(where, n) for path in CORE.rglob("*.py") for where, n in _functions(path) if n > 50]
    assert long == []


def test_the_facade_is_small_and_the_config_keeps_a_users_settings() -> None:
    tree = ast.parse((CORE / "memory.py").read_text(encoding="utf-8"))
    facade = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FlexAMem")
    assert facade.end_lineno - facade.lineno + 1 <= 300
    assert len(FlexAMemConfig.model_fields) <= 12
