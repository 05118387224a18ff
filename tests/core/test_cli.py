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
    import json

    from flexamem_tools.demo_answer import PLACES
    from flexamem_tools.demo_data import AGENT_ANSWER, CHAT_ANSWER

    page = tmp_path / "demo.html"
    assert main(["demo", "--budgets", "2000", "6000", "--html", str(page), "--json"]) == 0
    captured = capsys.readouterr().out
    lines = captured.splitlines()
    out = "\n".join(lines[:lines.index("[")])  # what prints without --json
    entries = json.loads("\n".join(lines[lines.index("["):]))
    assert len(out.splitlines()) < 40, out
    assert "</memory>" not in out  # messages only with --full
    # every kind of recovered detail has a column, in each table
    header = [line for line in out.splitlines() if line.startswith("┃")]
    for name in ("budget", "sent", "newest", "timeline", "records", "whole", "units", "excerpts", "pieces", "unused"):
        assert sum(name in line for line in header) == 2, (name, out)
    # a row per render, its cells what the render reports
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in out.splitlines() if line.startswith("│")]
    assert [(e["history"], e["budget"]) for e in entries] == [
        ("agent run", 2000), ("agent run", 6000), ("chat question", 2000), ("chat question", 6000)]
    assert len(rows) == len(entries)
    for row, e in zip(rows, entries):
        rep = e["report"]
        spent, units = rep["spent"], rep["resolutions"]
        budget, sent, _, _, timeline, raw, excerpts, pieces, unused, _ = row
        assert (budget, sent, unused) == (f"{e['budget']:,}", f"{rep['total_tokens']:,}",
                                          f"{e['budget'] - rep['total_tokens']:,}")
        assert timeline.endswith(f"({spent['timeline']:,})")
        assert raw == (f"{units['raw']} ({spent['raw']:,})" if units["raw"] else "0")
        assert excerpts == (f"{units['excerpt']} ({spent['excerpt']:,})" if units["excerpt"] else "0")
        assert pieces == (f"{len(rep['pieces'])} ({spent['pieces']:,})" if rep["pieces"] else "0")
    # an answer line per render; at the larger budget the answer is in the request
    assert {e["answer"] for e in entries} == {AGENT_ANSWER, CHAT_ANSWER}
    for e in entries:
        assert set(e["answer_in"]) <= set(PLACES)
        said = f'budget {e["budget"]:,}: answer "{e["answer"]}" in the request: '
        assert said + ("yes (in " if e["answer_in"] else "no") in out, (e["answer_in"], out)
        if e["budget"] == 6000:
            assert e["answer_in"], e
    text = page.read_text(encoding="utf-8")
    assert text.count('<section class="step"') == 4 and "<memory>" in text.replace("&lt;", "<").replace("&gt;", ">")


def test_the_demo_full_prints_every_message(capsys) -> None:
    from flexamem_tools.demo_data import AGENT_ANSWER, CHAT_ANSWER

    assert main(["demo", "--budgets", "2000", "6000", "--full"]) == 0
    out = capsys.readouterr().out
    assert out.count("[FlexA-Mem memory]") == 4 and "</memory>" in out and len(out.splitlines()) > 100
    # each answer line says what the request sent at that budget holds
    lines = out.splitlines()
    starts = [i for i, line in enumerate(lines) if " at budget " in line and line.startswith("─")]
    assert len(starts) == 4
    for k, start in enumerate(starts):
        title = lines[start]
        sent = "\n".join(lines[start + 1:starts[k + 1] if k + 1 < len(starts) else len(lines)])
        answer = AGENT_ANSWER if "agent run" in title else CHAT_ANSWER
        budget = title.split(" at budget ")[1].split(":")[0]
        said = f'budget {budget}: answer "{answer}" in the request: ' + ("yes (in " if answer in sent else "no")
        assert said in out, (title, out[:4000])
        if budget == "6,000":
            assert answer in sent


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
                 "--paths", "core", "dicts", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {int(r["units"]) for r in rows} == {30, 70}
    assert {r["mode"] for r in rows if "mode" in r} == {"auto/per-call", "auto/stable", "path:core", "path:dicts"}
    ratios = [r for r in rows if r["metric"] == "render_p50_over_core_path"]
    assert [r["mode"] for r in ratios] == ["path:dicts", "path:dicts"] and all(r["value"] > 0 for r in ratios)
    captured = capsys.readouterr()
    assert "writing" not in captured.err and "\r" not in captured.err  # stderr is not a terminal here
    assert "render_ms_p50" in captured.out


def test_demo_answer_lines_name_the_kind_of_text_that_holds_the_answer() -> None:
    from flexamem_core.recall.joins import PIECES_HEADER
    from flexamem_tools.demo_answer import answer_line, memory_places

    memory = "\n".join([
        "<memory>", "Earlier history, oldest first: ...",
        "- [steps 1-3] step 1 called `ls` -> A-1", "- [steps 4-6] (raw)", "[step 4] tool result", "B-2",
        "- [steps 7-9] step 7 called `cat` -> done", "(excerpt)", "C-3 ...",
        "- [steps 10-12] (merged) D-4", PIECES_HEADER, "== [steps 1-3] ==", "- [not a record] E-5", "</memory>"])
    assert [memory_places(memory, s) for s in ("A-1", "B-2", "C-3", "D-4", "E-5", "F-6")] == [
        {"record"}, {"raw"}, {"excerpt"}, {"record"}, {"piece"}, set()]
    assert answer_line("E-5", ["piece"]) == 'answer "E-5" in the request: yes (in a recovered piece)'
    assert answer_line("F-6", []) == 'answer "F-6" in the request: no'
