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


def test_every_option_of_every_command_says_what_it_does() -> None:
    import argparse
    import importlib

    for name, module_name in commands().items():
        parser = argparse.ArgumentParser(prog=f"flexamem {name}")
        importlib.import_module(module_name).configure(parser)
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help and action.help.strip(), f"flexamem {name} {action.option_strings[0]} has no help"


def test_bench_help_names_every_option(capsys) -> None:
    try:
        main(["bench", "--help"])
    except SystemExit as done:
        assert done.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for option in ("--sizes", "--renders", "--budget", "--modes", "--embed-sample", "--store", "--out"):
        assert option in out
    assert "units of about 1,000 tokens" in out and "default 8000" in out


def test_bench_writes_the_sizes_asked_for_and_no_progress_bar_off_a_terminal(tmp_path, capsys) -> None:
    import json

    out = tmp_path / "bench.json"
    assert main(["bench", "--sizes", "30", "70", "--renders", "4", "--embed-sample", "0", "--modes", "auto",
                 "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {int(r["units"]) for r in rows} == {30, 70}
    assert {r["mode"] for r in rows if "mode" in r} == {"auto/per-call", "auto/stable"}
    captured = capsys.readouterr()
    assert "writing" not in captured.err and "\r" not in captured.err  # stderr is not a terminal here
    assert "render_ms_p50" in captured.out
