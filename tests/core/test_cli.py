"""The ``flexamem`` command: subcommands found through entry points, and the demo's output."""

from __future__ import annotations

import subprocess
import sys

from flexamem_tools.cli import CORE, commands, help_line, main

NOT_IMPORTED = """
import sys
from flexamem_tools.cli import commands, help_line
lines = {name: help_line(module) for name, module in commands().items()}
print(sorted(lines), [m for m in ("flexamem_eval", "flexamem_minisweagent.replay") if m in sys.modules])
"""


def test_eval_and_replay_come_from_entry_points_and_listing_imports_neither() -> None:
    found = commands()
    assert found["eval"] == "flexamem_eval.cli" and found["replay"] == "flexamem_minisweagent.replay"
    assert set(CORE) == {"demo", "bench"}  # the core names no adapter or harness module itself
    assert help_line("flexamem_eval.cli").startswith("evaluate memories")
    out = subprocess.run([sys.executable, "-c", NOT_IMPORTED], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['bench', 'demo', 'eval', 'replay'] []"


def test_the_demo_prints_a_short_table_per_history_and_writes_the_page(tmp_path, capsys) -> None:
    page = tmp_path / "demo.html"
    assert main(["demo", "--budgets", "2000", "6000", "--html", str(page)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) < 30, out
    assert out.count("budget") >= 2 and "2,000" in out and "6,000" in out and "merged" in out
    assert "<memory>" not in out  # messages only with --full
    text = page.read_text(encoding="utf-8")
    assert text.count('<section class="step"') == 4 and "<memory>" in text.replace("&lt;", "<").replace("&gt;", ">")


def test_the_demo_full_prints_every_message(capsys) -> None:
    assert main(["demo", "--budgets", "2000", "6000", "--full"]) == 0
    out = capsys.readouterr().out
    assert out.count("[FlexA-Mem memory]") == 4 and "<memory>" in out and len(out.splitlines()) > 100
