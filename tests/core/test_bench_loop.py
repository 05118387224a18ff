"""``flexamem bench --loop``: saved runs replayed as agent loops through each adapter with the
real embedder, one row per adapter, load and method, the steps and units counted from what
the memory stored, and the busy processes gone afterwards."""

from __future__ import annotations

import json
import multiprocessing as mp
import subprocess
import sys
import time

import pytest

from flexamem_core import FlexAMem
from flexamem_core.host import config_for_budget
from flexamem_core.model.messages import Message
from tests.agent_runs import text_action_run

pytest.importorskip("flexamem_minisweagent")
pytest.importorskip("flexamem_langgraph")

from flexamem_minisweagent.trajectory import model_calls

from flexamem_tools.bench_loop import busy_processes, loop_rows, truncate


def test_the_loop_times_every_step_through_both_adapters_idle_and_busy(tmp_path, embedder):
    runs = [text_action_run(12), text_action_run(9)]
    data = tmp_path / "runs.jsonl"
    data.write_text("\n".join(json.dumps({"instance_id": f"r{i}", "messages": m}) for i, m in enumerate(runs)))
    lines: list[str] = []
    rows = loop_rows(str(data), limit=2, budget=1500, pause=0.0, busy=1, busy_seconds=60,
                     paths=("minisweagent", "langchain"), print_fn=lines.append)
    steps = sum(len(model_calls(m)) for m in runs)
    assert [(r["path"], r["load"], r["method"]) for r in rows] == [
        (p, load, m) for load in ("idle", "beside 1 CPU-bound processes") for p in ("minisweagent", "langchain")
        for m in ("flexamem", "truncation")]
    assert len(lines) == len(rows)
    # the units the loop wrote: what one memory writes ingesting each run up to its last model call
    stored = 0
    for m in runs:
        mem = FlexAMem(config_for_budget(1500), embedder=embedder)
        stored += mem.ingest([Message.from_dict(d) for d in m[:model_calls(m)[-1]]], namespace="n")
    for r in rows:
        assert r["steps"] == steps and r["runs"] == 2 and r["budget"] == 1500
        assert 0 < r["ms_p50"] <= r["ms_p95"] <= r["ms_max"]
        if r["method"] == "flexamem":
            assert r["units_written"] == stored > 0, r
            assert r["write_ms_per_unit"] > 0 and r["ms_mean_steps_writing"] > r["ms_mean_steps_not_writing"]
    assert not mp.active_children(), "the busy processes stop with their block"


def test_the_busy_pass_alone(tmp_path):
    data = tmp_path / "runs.jsonl"
    data.write_text(json.dumps({"instance_id": "r0", "messages": text_action_run(4)}))
    rows = loop_rows(str(data), limit=1, budget=1500, pause=0.0, busy=1, busy_seconds=60,
                     paths=("minisweagent",), print_fn=lambda _: None, idle=False)
    assert [(r["load"], r["method"]) for r in rows] == [("beside 1 CPU-bound processes", m)
                                                         for m in ("flexamem", "truncation")]
    assert not mp.active_children()


def test_busy_processes_run_for_the_block_only():
    with busy_processes(2, seconds=30):
        alive = [p for p in mp.active_children() if p.is_alive()]
        assert len(alive) == 2
    assert not mp.active_children()


def test_truncation_keeps_the_task_and_the_newest_messages_that_fit():
    run = text_action_run(30)
    kept = truncate(run, 2000, lambda text: len(text) // 4)
    assert kept[:2] == run[:2] and kept[-1] is run[-1]
    assert sum(len(str(m["content"])) // 4 + 4 for m in kept) <= 2000
    assert len(truncate(run, 2000 + 400, lambda text: len(text) // 4)) > len(kept)


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an exited child nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_busy_processes_stop_when_the_benchmark_is_killed():
    code = ("import multiprocessing as mp, time\nfrom flexamem_tools.bench_loop import busy_processes\n"
            "with busy_processes(1, 120):\n    print(*[p.pid for p in mp.active_children()], flush=True)\n"
            "    time.sleep(120)\n")
    bench = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert bench.stdout is not None
    spinners = [int(pid) for pid in bench.stdout.readline().split()]
    assert len(spinners) == 1 and _running(spinners[0])
    bench.kill()
    bench.wait()
    deadline = time.monotonic() + 20
    while any(map(_running, spinners)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(_running, spinners)), "a killed benchmark leaves no CPU-bound process behind"
