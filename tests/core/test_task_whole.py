"""The task is sent whole whenever it and the newest step fit the budget together: the newest
step (then the memory) gives way first; only a task that cannot fit beside the newest step is
cut, in the middle, with the mark, and the report counts it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.request.cuts import TRUNCATION_MARK
from flexamem_core.request.tokens import default_tokenizer
from tests.core.checks import steps, structure_problem

MARK = TRUNCATION_MARK.split("{n}")[0]
DATA = Path(os.environ.get("FLEXAMEM_DEV_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
TRAJECTORIES = DATA / "trajectories" / "mini_swe_agent_gemini3pro_dev200.jsonl.gz"


def _task(words: int) -> str:
    return "Fix the parser. " + " ".join(f"detail{i}" for i in range(words))


def _history(task: str, n: int) -> list[dict]:
    return [{"role": "system", "content": "You are a shell agent."}, {"role": "user", "content": task},
            *steps(n, size=120)]


@pytest.mark.parametrize("cache_stable", [True, False])
def test_a_large_task_that_fits_beside_the_newest_step_is_sent_whole(cache_stable, hashing_embedder):
    task = _task(1400)  # about 2,900 tokens: over B_bar less the window's share at 4,000
    tk = default_tokenizer()
    assert tk.count(task) > 0.95 * 4000 - 0.25 * 4000
    mem = FlexAMem(FlexAMemConfig(budget=4000, cache_stable=cache_stable), embedder=hashing_embedder)
    for n in range(1, 30):
        r = mem.render(_history(task, n))
        assert r.messages[1].content == task, f"call {n}: the task is whole"
        assert r.report.get("task_cut_messages", 0) == 0
        assert r.tokens <= 0.95 * 4000 and structure_problem(r.messages) is None
        assert r.messages[-1].content.startswith("<returncode>0</returncode>\nnote "), "the newest output is sent"


def test_a_task_too_large_for_the_newest_step_is_cut_with_its_mark(hashing_embedder):
    task = _task(1750)  # about 3,600 tokens: no room left for the newest step
    mem = FlexAMem(FlexAMemConfig(budget=4000), embedder=hashing_embedder)
    history = _history(task, 12)
    r = mem.render(history)
    assert MARK in r.messages[1].content and r.messages[1].content.startswith("Fix the parser.")
    assert r.report["task_cut_messages"] == 1 and r.tokens <= 0.95 * 4000
    assert history[1]["content"] == task, "the caller's history keeps it whole"


@pytest.mark.skipif(not TRAJECTORIES.exists(), reason="dev trajectories not present")
def test_on_dev_trajectories_the_task_is_whole_wherever_it_fits_beside_the_newest_step(hashing_embedder):
    from flexamem_eval.datasets import load

    tk = default_tokenizer()
    budget, checked = 4000, 0
    items = sorted(load("trajectories", TRAJECTORIES, 40), key=lambda it: -tk.count(it.messages[1].text))[:8]
    for item in items:  # the eight with the largest tasks of the first 40
        mem = FlexAMem(FlexAMemConfig(budget=budget), embedder=hashing_embedder)
        msgs = list(item.messages)
        for end in range(4, len(msgs) + 1, 2):
            history = msgs[:end]
            r = mem.render(history)
            newest = [m for m in history[2:][-2:]]
            if mem.count_messages([*history[:2], *newest]) <= 0.95 * budget:
                checked += 1
                assert r.messages[1].content == history[1].content, f"{item.item_id} call {end}"
    assert checked > 100
