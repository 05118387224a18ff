"""Prompt caching in the evaluation: the cached prefix on hand-built requests, the runner's
calls (every model call, one budget after the other, in order) and the report's fields."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from flexamem_core import FlexAMemConfig, Message, ToolCall
from flexamem_core.cache.prefix import CACHED_PRICE, NEW_PRICE, CacheMeter, call_cost, common_prefix_tokens
from flexamem_core.request.counting import PER_MESSAGE, PER_REQUEST, count_messages
from flexamem_eval.items import Question
from flexamem_eval.methods import METHODS, make_method, recency
from flexamem_eval.methods.base import Env, Method
from flexamem_eval.report import CACHE_METRICS, aggregate, markdown, write_outputs
from flexamem_eval.runner import ItemResult, RenderRecord, Spec, evaluate_item

from .test_methods import trajectory

SYSTEM = Message(role="system", content="You are a shell agent. Reply with one bash block.")
TASK = Message(role="user", content="Fix the failing import in pkg/handler.py and run the tests.")
OUT = Message(role="user", content="<returncode>0</returncode>\n<output>\npkg/handler.py\npkg/util.py\n</output>")
ACT = Message(role="assistant", content="THOUGHT: read it\n\n```bash\ncat pkg/handler.py\n```")


@pytest.fixture(scope="module")
def env(tokenizer, embedder):
    return Env(tokenizer=tokenizer, embedder_factory=lambda: embedder, config=FlexAMemConfig())


# ------------------------------------------------------------------ the cached prefix

def test_identical_requests_are_cached_in_full(tokenizer):
    request = [SYSTEM, TASK, ACT, OUT]
    again = [Message(role=m.role, content=m.content) for m in request]  # equal, not the same objects
    assert common_prefix_tokens(request, again, tokenizer) == count_messages(request, tokenizer)


def test_an_appended_request_reuses_all_of_the_previous_one(tokenizer):
    before = [SYSTEM, TASK, ACT]
    after = [*before, OUT, ACT]
    assert common_prefix_tokens(before, after, tokenizer) == count_messages(before, tokenizer)
    meter = CacheMeter(tokenizer)
    assert meter.add(before) == (count_messages(before, tokenizer), 0)  # the first call has nothing cached
    tokens, cached = meter.add(after)
    first = count_messages(before, tokenizer)
    assert (tokens, cached) == (count_messages(after, tokenizer), first)
    assert meter.calls == 2 and meter.cached_prefix_share == pytest.approx(cached / (first + tokens))
    assert meter.cost_per_call == pytest.approx((NEW_PRICE * first + call_cost(tokens, cached)) / 2)


def test_a_change_in_the_middle_keeps_the_tokens_before_it(tokenizer):
    edited = Message(role="assistant", content="THOUGHT: read it\n\n```bash\ncat pkg/util.py\n```")
    before, after = [SYSTEM, TASK, ACT, OUT], [SYSTEM, TASK, edited, OUT]
    a, b = (tokenizer.encoding.encode_ordinary(m.text) for m in (ACT, edited))
    same = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    assert 0 < same < len(b)
    expected = count_messages([SYSTEM, TASK], tokenizer) + PER_MESSAGE + same
    assert common_prefix_tokens(before, after, tokenizer) == expected
    assert expected < count_messages([SYSTEM, TASK, edited], tokenizer)


def test_a_role_change_ends_the_cached_prefix_before_that_message(tokenizer):
    as_user = Message(role="user", content=ACT.content)
    assert common_prefix_tokens([SYSTEM, TASK, ACT], [SYSTEM, TASK, as_user], tokenizer) == \
        count_messages([SYSTEM, TASK], tokenizer)
    assert common_prefix_tokens([SYSTEM], [Message(role="user", content=SYSTEM.content)], tokenizer) == PER_REQUEST
    assert common_prefix_tokens([], [SYSTEM], tokenizer) == 0


def test_price_model():
    assert (CACHED_PRICE, NEW_PRICE) == (0.1, 1.25)
    assert call_cost(1000, 0) == pytest.approx(1250) and call_cost(1000, 1000) == pytest.approx(100)
    assert call_cost(1000, 800) == pytest.approx(0.1 * 800 + 1.25 * 200)


def test_env_count_is_the_core_count(env, tokenizer):
    call = ToolCall(id="c1", name="bash", arguments='{"command": "ls"}')
    tool = Message(role="assistant", content="", tool_calls=(call,))
    for request in ([], [SYSTEM], [SYSTEM, TASK, ACT, OUT, tool, ACT, ACT],
                    [Message(role="user", content=OUT.content + " changed")], [tool]):
        for _ in range(2):  # the second time from the per-message cache
            assert env.count(request) == count_messages(request, tokenizer)


# ------------------------------------------------------------------ the runner's calls

class Probe(Method):
    """A stateful method: it checks that its calls come in order and sends the whole history."""

    name = "probe"
    log: ClassVar[list[tuple[int, int, int]]] = []  # (instance, budget, history length)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[Message] = []

    def question_context(self, question: Question, budget: int) -> list[Message]:
        raise NotImplementedError

    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        assert list(history[: len(self.seen)]) == self.seen and len(history) > len(self.seen), "out of order"
        self.seen = list(history)
        Probe.log.append((id(self), budget, len(history)))
        return list(history)


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.setattr(recency, "Probe", Probe, raising=False)
    monkeypatch.setitem(METHODS, "probe", ("recency", "Probe"))
    Probe.log.clear()
    return Probe


def test_every_call_is_rendered_in_order_one_budget_after_the_other(env, probe):
    item = trajectory(12)
    calls = [i for i, m in enumerate(item.messages) if m.role == "assistant"]
    budgets = (1000, 1500)
    res = evaluate_item(item, Spec("trajectories", budgets, ("probe",)), env)
    instances = list(dict.fromkeys(i for i, _, _ in probe.log))
    assert len(instances) == 2, "a fresh instance per budget"
    for inst, budget in zip(instances, budgets, strict=True):
        assert [(b, n) for i, b, n in probe.log if i == inst] == [(budget, k) for k in calls]
    assert [b for _, b, _ in probe.log] == [1000] * len(calls) + [1500] * len(calls), "budgets outer"
    for budget in budgets:
        recs = [r for r in res.renders if r.budget == budget]
        over = [s for s, k in enumerate(calls) if env.count(item.messages[:k]) > env.effective(budget)]
        assert over and len(over) < len(calls), "the trajectory crosses the budget"
        assert [r.step for r in recs] == over, "every call over the budget is measured, in order"
        for r in recs:  # the whole history each time: the previous call is cached in full
            k = calls[r.step]
            assert r.tokens == env.count(item.messages[:k])
            assert r.cached == env.count(item.messages[: calls[r.step - 1]])


def test_real_methods_carry_cached_tokens(env):
    item = trajectory(16)
    calls = [i for i, m in enumerate(item.messages) if m.role == "assistant"]
    res = evaluate_item(item, Spec("trajectories", (1200, 2000), ("full", "truncation", "masking")), env)
    by = {(r.method, r.budget, r.step): r for r in res.renders}
    fixed = env.count(list(item.messages[:2]))
    for (method, _, step), r in by.items():
        assert r.cached is not None and 0 < r.cached <= r.tokens
        if method == "full":
            assert r.cached == env.count(item.messages[: calls[step - 1]])
        else:
            assert r.cached >= fixed, "system prompt and task stay at the start"
    assert any(r.cached < r.tokens * 0.9 for (m, _, _), r in by.items() if m == "truncation")
    assert {w.method for w in res.writes} == {"full", "truncation", "masking"} and len(res.writes) == 3


def test_amem_renders_agent_steps_itself(env):
    history = list(trajectory(16).messages)
    budget = 1200
    limit = env.effective(budget)
    assert env.count(history) > limit
    own = make_method("amem", env, {}).fit_step(history, budget, limit)
    assert make_method("amem", env, {}).step_context(history, budget) == own


# ------------------------------------------------------------------ the report

def _records() -> list[ItemResult]:
    res = ItemResult()
    for method, calls in (("a", [(1000, 0), (1100, 1000), (1200, 600)]), ("b", [(500, 0), (500, 500)])):
        res.renders += [RenderRecord(method, 4000, "t", "all", tokens, 1.0, step=i, cached=cached)
                        for i, (tokens, cached) in enumerate(calls)]
    return [res]


def test_report_has_the_cache_fields_and_the_price_model(tmp_path):
    rows = aggregate("trajectories", _records())
    get = {(r["method"], r["metric"]): r for r in rows}
    assert get[("a", "cached_prefix_share")]["value"] == pytest.approx(1600 / 3300, abs=1e-6)
    assert get[("a", "cached_prefix_share")]["n"] == 3300
    cost = (1.25 * 1000 + (0.1 * 1000 + 1.25 * 100) + (0.1 * 600 + 1.25 * 600)) / 3
    assert get[("a", "cost_per_call")]["value"] == pytest.approx(cost, abs=1e-6)
    assert get[("a", "cost_per_call")]["price_model"]["cached_token"] == 0.1
    assert get[("a", "cost_per_call")]["price_model"]["new_token"] == 1.25
    assert get[("a", "calls")]["value"] == 3 and get[("b", "calls")]["value"] == 2
    assert get[("b", "cached_prefix_share")]["value"] == 0.5
    text = markdown(rows)
    assert all(m in text for m in CACHE_METRICS) and "0.1 x cached + 1.25 x new" in text
    # reused and trace recall, task kept (not recorded here), reused near and far, the spread of
    # the first, then the cache
    assert "| a | – | – | – | – | – | – | – | – | 48.5 | " in text
    assert get[("a", "task_kept")]["value"] is None and get[("a", "task_kept")]["n"] == 0
    paths = write_outputs(tmp_path, rows, ["b", "a"])
    assert tmp_path / "trajectories_prompt_cache.png" in paths
    assert (tmp_path / "trajectories_prompt_cache.png").stat().st_size > 1000


# ------------------------------------------------------------------ run time

def test_torch_threads_are_shared_out_among_workers(monkeypatch):
    from flexamem_eval.runner import worker_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert worker_threads(1) is None, "one process: torch's default"
    assert worker_threads(4) == 2 and worker_threads(16) == 1
    assert worker_threads(4, threads=3) == 3 and worker_threads(1, threads=1) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "5")
    assert worker_threads(4) is None, "the user's setting stands"


def test_task_kept_is_the_share_of_recorded_calls():
    res = ItemResult()
    res.renders += [RenderRecord("a", 4000, "t", "all", 900, 1.0, step=i, cached=0, task_kept=kept)
                    for i, kept in enumerate([True, False, True, None])]
    row = next(r for r in aggregate("trajectories", [res]) if r["metric"] == "task_kept")
    assert row["value"] == pytest.approx(2 / 3) and row["n"] == 3
