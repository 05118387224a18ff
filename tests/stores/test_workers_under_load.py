"""Worker processes with several threads each serving agent threads on one store, a thread's
calls hopping between processes (``flexamem bench --workers`` runs the same at 4 x 8)."""

from __future__ import annotations

import uuid

import pytest
from conftest import _make_backend

from flexamem_tools.bench_workers import LoadPlan, run_load


@pytest.fixture(params=["sqlite", "postgres"])
def shared_backend(request, tmp_path):
    yield from _make_backend(request.param, tmp_path)


def test_workers_lose_nothing_stay_within_budget_and_send_what_one_process_sends(shared_backend):
    plan = LoadPlan(shared_backend.url, processes=2, threads=3, agents=6, steps=14, budget=2500,
                    run=f"load-{uuid.uuid4().hex[:8]}")
    got = run_load(plan)
    assert got["errors"] == []
    assert got["calls"] == plan.agents * (plan.steps + 1)
    assert got["calls_served_by_another_process"] == plan.agents * plan.steps  # round robin: every later call
    assert got["over_budget"] == 0
    assert got["units_lost"] == got["units_duplicated"] == 0
    assert got["requests_unlike_one_process"] == 0
