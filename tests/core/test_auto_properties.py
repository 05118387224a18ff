"""``mode="auto"`` keeps every invariant: the adversarial generators and oracle run with the
automatic rule, and an agent render checks its report (the general render properties in
``test_render_properties.py`` sample ``auto`` with the fixed modes)."""

from __future__ import annotations

import copy
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import BudgetError, FlexAMem, FlexAMemConfig, Message, Tuning
from flexamem_core.request.counting import count_messages
from flexamem_core.request.properties import Context, problems
from tests.adversarial import generators as gen
from tests.adversarial.oracle import FAILURES, check_budget_error, check_render
from tests.adversarial.test_adversarial import _budgets, fixed_prompt, run_calls

from .checks import independent_tokens, structure_problem
from .strategies import agent_history

# At most 200 examples under CI: the general property suites run 1,000 over the same invariants.
PROPS = settings(max_examples=min(200, settings.default.max_examples), deadline=None,
                 suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("seed", range(4))
def test_generated_agent_histories_in_auto_mode(seed, tokenizer, hashing_embedder):
    start = len(FAILURES)
    rng = random.Random(50_000 + seed)
    for case in range(30):
        history = gen.agent_history(rng)
        cfg = FlexAMemConfig(mode="auto", cache_stable=rng.random() < 0.7,
                             tuning=Tuning(agent_unit_tokens=rng.choice([100, 300, 1000])),
                             pin_user_turn=rng.random() < 0.8)
        mem = FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder)
        run_calls(mem, history, _budgets(rng, history, tokenizer), rng.choice([0, 0, 50, 400]),
                  f"auto agent seed {seed} case {case}", edit_rng=rng)
    assert not FAILURES[start:], "\n".join(FAILURES[start:])


@pytest.mark.parametrize("seed", range(2))
def test_generated_conversations_in_auto_mode(seed, tokenizer, hashing_embedder):
    start = len(FAILURES)
    rng = random.Random(60_000 + seed)
    for case in range(30):
        history = gen.conversation(rng)
        mem = FlexAMem(FlexAMemConfig(history="reader", mode="auto", tuning=Tuning(reader_unit_tokens=500)),
                       tokenizer=tokenizer, embedder=hashing_embedder)
        msgs = [Message.from_dict(m) for m in history]
        for k, budget in enumerate(rng.randint(150, 6000) for _ in range(2)):
            try:
                r = mem.render(history, budget=budget)
            except BudgetError as exc:
                check_budget_error(exc, fixed_prompt(msgs, "reader"), [], budget, 0, f"auto conv {seed}/{case}/{k}")
                continue
            check_render(r, msgs, budget, 0, "reader", f"auto conversation seed {seed} case {case} budget {budget}",
                         "generated conversation")
            if not r.passthrough:
                assert "auto" in r.report
    assert not FAILURES[start:], "\n".join(FAILURES[start:])


@PROPS
@given(history=agent_history(), budget=st.integers(150, 9000), stable=st.booleans())
def test_auto_agent_render_fits_budget_and_keeps_structure(history, budget, stable, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=budget, mode="auto", cache_stable=stable), tokenizer=tokenizer,
                   embedder=hashing_embedder)
    before = copy.deepcopy(history)
    try:
        r = mem.render(history)
    except BudgetError:
        fixed = [m for m in history[:2] if m["role"] in ("system", "user")]
        assert count_messages([Message.from_dict(m) for m in fixed], tokenizer) + 40 * 8 > budget * 0.95 or \
            budget < 1200
        return
    assert history == before, "the caller's messages were mutated"
    assert r.tokens == count_messages(r.messages, tokenizer) == independent_tokens(r.messages)
    assert problems(r.messages, Context([Message.from_dict(m) for m in history], r.report)) == {}
    assert r.tokens <= int(budget * 0.95)
    assert structure_problem(r.messages) is None, structure_problem(r.messages)
    if not r.passthrough:
        assert r.report["mode"] == "auto" and "why" in r.report["auto"]
        assert r.report["memory_tokens"] <= r.report["allowance"] or r.memory_text is None
