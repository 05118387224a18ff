"""The render invariants, property-tested over thousands of generated histories."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import BudgetError, FlexAMem, FlexAMemConfig, Message, Tuning
from flexamem_core.request.counting import count_messages
from flexamem_core.request.properties import Context, problems

from .checks import independent_tokens, structure_problem
from .strategies import agent_history, conversation

# Example counts come from the hypothesis profile (tests/conftest.py): thousands in CI.
TRUNCATION = "omitted by FlexA-Mem to fit the budget"
PROPS = settings(deadline=None, suppress_health_check=list(HealthCheck))
FEW = PROPS


@PROPS
@given(history=agent_history(), budget=st.integers(150, 9000), mode=st.sampled_from(["auto", "unit", "piece"]))
def test_agent_render_fits_budget_and_keeps_structure(history, budget, mode, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=budget, mode=mode), tokenizer=tokenizer, embedder=hashing_embedder)
    before = copy.deepcopy(history)
    try:
        r = mem.render(history)
    except BudgetError:
        # Documented: only when the fixed prompt, or the newest step cut to its bones, cannot fit.
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
        assert r.messages[0].role == ("system" if history[0]["role"] == "system" else "user")
        task = next(m for m in history if m["role"] == "user")
        if r.report["task_cut_messages"]:  # larger than the room the budget leaves it: cut, marked
            assert any(m.role == "user" and TRUNCATION in m.text for m in r.messages[:2])
        else:
            assert any(m.role == "user" and m.content == task["content"] for m in r.messages[:2])
        assert sum(1 for m in r.messages if m.metadata.get("flexamem") == "memory") <= 1


@FEW
@given(history=conversation(), budget=st.integers(300, 6000), mode=st.sampled_from(["auto", "unit", "piece"]))
def test_reader_render_fits_budget(history, budget, mode, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=budget, mode=mode, history="reader"), tokenizer=tokenizer,
                   embedder=hashing_embedder)
    try:
        r = mem.render(history)
    except BudgetError:
        last_user = max(i for i, m in enumerate(history) if m["role"] == "user")
        current = [Message.from_dict(m) for m in history[last_user:]]
        assert count_messages(current, tokenizer) > budget * 0.95 - 60
        return
    assert r.tokens <= int(budget * 0.95)
    assert structure_problem(r.messages) is None, structure_problem(r.messages)
    assert r.messages[-1].content == history[-1]["content"], "the current turn was dropped"


@FEW
@given(history=agent_history(min_steps=5), budget=st.integers(1500, 5000))
def test_render_is_deterministic_and_leaves_store_verbatim(history, budget, tokenizer, hashing_embedder):
    cfg = FlexAMemConfig(budget=budget)
    a = FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder)
    b = FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder)
    ra, rb = a.render(history), b.render(history)
    assert ra.messages == rb.messages and ra.report == rb.report
    units_before = {n.unit_key: a.store.get_unit("default", n.unit_key) for n in a.store.notes("default")}
    notes_before = [n.to_dict() for n in a.store.notes("default")]
    again = a.render(history)
    assert again.messages == ra.messages
    assert [n.to_dict() for n in a.store.notes("default")] == notes_before
    # Everything written is stored verbatim: each stored unit's messages are history messages.
    by_id = {m["id"]: Message.from_dict(m) for m in history}
    for unit in units_before.values():
        for m in unit.messages:
            assert m == by_id[m.id]


@FEW
@given(history=agent_history(min_steps=3), cut=st.integers(1, 40))
def test_ingestion_is_idempotent_and_prefix_stable(history, cut, tokenizer, hashing_embedder):
    cfg = FlexAMemConfig(budget=4000, tuning=Tuning(agent_unit_tokens=300))
    incremental = FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder)
    prefix = history[: max(2, len(history) * cut // 40)]
    incremental.ingest(prefix)
    assert incremental.ingest(prefix) == 0
    incremental.ingest(history)
    assert incremental.ingest(history) == 0
    scratch = FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder)
    scratch.ingest(history)
    keys = [n.unit_key for n in incremental.store.notes("default")]
    assert keys == [n.unit_key for n in scratch.store.notes("default")]


@pytest.mark.parametrize("mode", ["auto", "unit", "piece"])
def test_namespaces_are_isolated(mode, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=1500, mode=mode), tokenizer=tokenizer, embedder=hashing_embedder)
    secret = [{"role": "user", "content": "task"}] + [
        m for i in range(12) for m in (
            {"role": "assistant", "content": f"```bash\ncat f{i}\n```"},
            {"role": "user", "content": f"CANARY-7731-{i} " + "filler words here " * 60})]
    other = [{"role": "user", "content": "task"}] + [
        m for i in range(12) for m in (
            {"role": "assistant", "content": f"```bash\ncat g{i}\n```"},
            {"role": "user", "content": "other tenant output " * 60})]
    mem.render(secret, namespace="tenant-a")
    r = mem.render(other, namespace="tenant-b", query="CANARY-7731")
    assert "CANARY" not in "\n".join(m.text for m in r.messages)
