"""The HTML replay: a self-contained page per sequence of renders, opened in headless Chromium.

The browser tests load the page in Debian's Chromium through Playwright, click through to
the messages of a step, read what the page shows and take a screenshot; they skip locally
when Chromium is missing and run under ``CI=true`` (``.ci/run`` installs it).
"""

from __future__ import annotations

import re
from collections import Counter
from html import escape as html_escape
from pathlib import Path

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.model.messages import message_text
from flexamem_tools.demo_data import agent_history
from flexamem_tools.replay_html import html_page, write_html
from flexamem_tools.replay_view import as_views

from .browser import visit

DEV = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "trajectories" / \
    "mini_swe_agent_gemini3pro_dev100.jsonl.gz"

READ_PAGE = """() => ({
  steps: document.querySelectorAll("section.step").length,
  cells: [...document.querySelectorAll("section.step")].map(s => s.querySelectorAll(".strip .unit").length),
  segments: [...document.querySelectorAll("section.step")].map(s => s.querySelectorAll(".bar .seg").length),
  open: [...document.querySelectorAll("details")].filter(d => d.open).length,
  firstMessages: [...document.querySelector("details[open]").querySelectorAll(".msg pre")]
      .map(p => p.textContent),
  visible: document.querySelector("details[open] .msg").getBoundingClientRect().height > 0,
})"""


def _thread(tokenizer, embedder, budget: int = 3000):
    """Every model call of the packaged 60-step agent run, rendered in order."""
    mem = FlexAMem(FlexAMemConfig(budget=budget), tokenizer=tokenizer, embedder=embedder)
    history = agent_history()
    return [mem.render(history[:i], namespace="html") for i, m in enumerate(history) if m.role == "assistant"]


def test_the_page_is_self_contained_and_shows_every_part(tokenizer, hashing_embedder):
    renders = _thread(tokenizer, hashing_embedder)
    page = html_page(renders, title="demo <thread>")
    assert "<script" not in page and not re.search(r"(src|href)=\"(https?:|//)", page)
    assert "demo &lt;thread&gt;" in page  # escaped
    assert page.count('<section class="step"') == len(renders)
    views = as_views(renders)
    rendered = [v for v in views if not v.passthrough]
    assert rendered and {v.cache_step for v in rendered} <= {"render", "extend", "compact", "append"}
    for view, r in zip(views, renders):
        assert sum(view.split.values()) == max(view.budget, r.tokens)
        assert view.reused_prefix == r.report["cache"]["reused_prefix_tokens"]
        if not r.passthrough:
            assert set(view.split) == {"system + task", "memory", "window", "unused"}
            assert view.split["memory"] == r.report["memory_tokens"]
            assert len(view.units) == r.report["old_units"]
            counts = Counter(u["resolution"] for u in view.units)
            assert counts == Counter({k: n for k, n in r.report["resolutions"].items() if n})
            assert all(view.units[u["position"]] == u for u in r.report["units"])
        assert [m.text for m in view.messages] == [message_text(m) for m in r.messages]
        assert sum(m.memory for m in view.messages) == (r.memory_text is not None)


def test_a_rendered_sequence_opens_in_chromium_without_console_errors(tmp_path, tokenizer, hashing_embedder):
    renders = _thread(tokenizer, hashing_embedder)
    page = write_html(renders, tmp_path / "thread.html", title="FlexA-Mem demo thread")
    shot = tmp_path / "thread.png"
    seen = visit(page, shot, READ_PAGE)
    assert seen.problems == []
    facts = seen.facts
    assert facts["steps"] == len(renders) and facts["open"] == 1 and facts["visible"]
    assert facts["firstMessages"] == [message_text(m) for m in renders[0].messages]
    views = as_views(renders)
    assert facts["cells"] == [len(v.units) + v.window_units if v.units or v.window_units else 0 for v in views]
    assert facts["segments"] == [sum(1 for n in v.split.values() if n > 0) for v in views]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


@pytest.mark.skipif(not DEV.exists(), reason="the dev trajectories (../shared/data) are not here")
def test_flexamem_replay_html_of_a_real_dev_trajectory_opens_in_chromium(tmp_path, capsys):
    pytest.importorskip("flexamem_minisweagent")
    from flexamem_minisweagent.trajectory import load_trajectories, model_calls, select_trajectory

    from flexamem_tools.cli import main

    out = tmp_path / "replay.html"
    assert main(["replay", str(DEV), "--index", "0", "--budget", "8000", "--html", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    trajectory = select_trajectory(load_trajectories(str(DEV)), None, 0)
    n_calls = len(model_calls(trajectory["messages"]))
    shot = tmp_path / "replay.png"
    seen = visit(out, shot, READ_PAGE)
    assert seen.problems == []
    assert seen.facts["steps"] == n_calls and seen.facts["visible"]
    first = seen.facts["firstMessages"]
    assert first[0] == trajectory["messages"][0]["content"]  # step 1 passes the history through as sent
    assert any(seen.facts["cells"]), "a later step over the budget shows its units"
    assert shot.stat().st_size > 10_000


def record_starts(memory_text: str) -> list[int]:
    """The first step of every record line of a memory, in the order shown: lines ``- [step N]``
    or ``- [steps N-M]`` that are not recovered text (``(raw)``, or a head followed by
    ``(excerpt)``)."""
    lines = memory_text.splitlines()
    starts = []
    for k, line in enumerate(lines):
        m = re.match(r"- \[steps? (\d+)(?:-\d+)?\] (?!\(raw\))", line)
        if m and not (k + 1 < len(lines) and lines[k + 1] == "(excerpt)"):
            starts.append(int(m.group(1)))
    return starts


@pytest.mark.skipif(not DEV.exists(), reason="the dev trajectories (../shared/data) are not here")
@pytest.mark.parametrize("budget", [4000, 8000])
def test_a_replayed_dev_trajectory_shows_its_records_in_time_order_with_their_identifiers(tmp_path, budget):
    """What ``flexamem replay --html`` shows: in every call's memory the records run oldest
    first (recovered text follows the records it was recovered with, as the memory's header
    says), and records carry the identifiers their steps revealed."""
    pytest.importorskip("flexamem_minisweagent")
    from flexamem_minisweagent.replay import replay
    from flexamem_minisweagent.trajectory import load_trajectories

    from flexamem_core.recall.assembly import MEMORY_INTRO
    from flexamem_core.recall.revealed import REVEALED_MARK

    trajectories = load_trajectories(str(DEV))
    revealed = 0
    for trajectory in trajectories[:3]:
        steps = replay(trajectory, budget)["steps"]
        page = html_page(steps, title="order")
        for step in steps:
            memory = step["memory_text"]
            if memory is None:
                continue
            assert MEMORY_INTRO in memory
            starts = record_starts(memory)
            assert starts == sorted(starts), memory
            shown = [ln for ln in memory.splitlines() if REVEALED_MARK in ln]
            assert all(html_escape(ln) in page for ln in shown)
            revealed += len(shown)
    assert revealed > 0
