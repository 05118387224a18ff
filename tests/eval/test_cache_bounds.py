"""The bounds prompt caching sets on a trajectory (:mod:`flexamem_eval.cache_bounds`): their
formula on a hand-made run, and that the real methods that keep the task and show each new
step stay within them, as the evaluation measures them."""

from __future__ import annotations

import pytest

from flexamem_core import FlexAMemConfig
from flexamem_core.cache.prefix import CACHED_PRICE, NEW_PRICE
from flexamem_core.request.counting import PER_REQUEST
from flexamem_eval.cache_bounds import cache_bounds, step_bounds
from flexamem_eval.datasets import load
from flexamem_eval.methods.base import Env
from flexamem_eval.report import aggregate
from flexamem_eval.runner import Spec, evaluate_item

from .test_dev_data import TRAJ, needs_data
from .test_methods import trajectory

#: Methods bound by the floor and the ceiling: each keeps the system message and the task
#: and sends the newest step as it is.
BOUND = ("truncation", "masking", "masking-log", "flexamem-auto", "flexamem-unit-per-call")


@pytest.fixture(scope="module")
def env(tokenizer, embedder):
    return Env(tokenizer=tokenizer, embedder_factory=lambda: embedder, config=FlexAMemConfig())


def test_the_bounds_of_a_hand_made_run(env):
    item = trajectory(16)
    messages = list(item.messages)
    budget = 1200
    b_bar = env.effective(budget)
    calls = [i for i, m in enumerate(messages) if m.role == "assistant"]
    fixed = env.count(messages[:2])
    expected = [(s, env.count(messages[calls[s - 1]:k]) - PER_REQUEST) for s, k in enumerate(calls)
                if env.count(messages[:k]) > b_bar]
    assert 0 < len(expected) < len(calls), "the run crosses the budget"
    got = step_bounds(env, messages, budget)
    assert [(b.step, b.new) for b in got] == expected and {b.fixed for b in got} == {fixed}
    bounds = cache_bounds(env, [messages], budget)
    new = sum(n for _, n in expected)
    assert bounds.calls == len(expected)
    assert bounds.cost_floor == pytest.approx(CACHED_PRICE * fixed + NEW_PRICE * new / len(expected))
    assert bounds.cached_share_ceiling == pytest.approx(1 - new / (len(expected) * b_bar))
    assert cache_bounds(env, [messages], 100_000).calls == 0, "nothing is measured below the budget"


def _measured(env, items, budgets, methods):
    results = [evaluate_item(item, Spec("trajectories", budgets, methods), env) for item in items]
    rows = aggregate("trajectories", results)
    return {(r["method"], r["budget"], r["metric"]): r["value"] for r in rows}


def _check_within(env, items, budgets):
    values = _measured(env, items, budgets, BOUND)
    for budget in budgets:
        bounds = cache_bounds(env, [it.messages for it in items], budget)
        assert bounds.calls > 0
        for method in BOUND:
            cost = values[(method, budget, "cost_per_call")]
            share = values[(method, budget, "cached_prefix_share")]
            assert cost >= bounds.cost_floor, (method, budget, cost, bounds)
            assert share <= bounds.cached_share_ceiling, (method, budget, share, bounds)


def test_methods_that_keep_the_task_stay_within_the_bounds(env):
    _check_within(env, [trajectory(24)], (1200, 2000))


@needs_data
def test_methods_stay_within_the_bounds_on_dev_trajectories(env):
    _check_within(env, load("trajectories", TRAJ, limit=2), (4000, 8000))
