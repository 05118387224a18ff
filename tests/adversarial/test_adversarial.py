"""Hostile histories and every dev history, rendered call by call, checked against every invariant.

Generated histories (seeded, ``generators``) and the real dev data in ``../shared/data``
(every trajectory rendered before every model call, every conversation asked its
questions) go through every mode and setting; each render is checked against an
independent count of what is sent and every message rule (``oracle``). CI runs
``FLEXAMEM_ADVERSARIAL_SCALE=1`` (over 10,000 checked renders in a few minutes); raise it
for a larger local run. The real-data part skips when the data folder is absent.
"""

from __future__ import annotations

import copy
import os
import random
from pathlib import Path

import pytest

from flexamem_core import BudgetError, FlexAMem, FlexAMemConfig, Message, Tuning
from flexamem_core.request.layout import split_layout
from flexamem_core.request.properties import newest_step
from tests.conftest import flat_config

from . import generators as gen
from .oracle import CHECKED, FAILURES, check, check_budget_error, check_render

SCALE = float(os.environ.get("FLEXAMEM_ADVERSARIAL_SCALE", "1"))
DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def model_calls(history: list[dict]) -> list[int]:
    """Where the model is called: before every assistant message, and at the end."""
    return [i for i, m in enumerate(history) if m["role"] == "assistant" and i > 0] + [len(history)]


def fixed_prompt(msgs: list[Message], kind: str) -> list[Message]:
    layout = split_layout(msgs, kind)
    return [*layout.fixed, *layout.current]


def run_calls(mem: FlexAMem, history: list[dict], budgets: list[int], extra: int, where: str,
              kind: str = "agent", every: int = 1, edit_rng: random.Random | None = None,
              origin: str = "generated agent") -> None:
    """Render the history before each model call (every ``every``-th), as the host's loop does."""
    before = copy.deepcopy(history)
    cuts = model_calls(history)[::every]
    for k, cut in enumerate(cuts):
        h = history[:cut]
        if edit_rng is not None and edit_rng.random() < 0.05:
            h = gen.edited(edit_rng, h)
        budget = budgets[k % len(budgets)]
        msgs = [Message.from_dict(m) for m in h]
        try:
            r = mem.render(h, budget=budget, extra_tokens=extra)
        except BudgetError as exc:
            check_budget_error(exc, fixed_prompt(msgs, kind), newest_step(msgs, kind), budget, extra,
                               f"{where} call {k}")
            continue
        check_render(r, msgs, budget, extra, kind, f"{where} call {k} (budget {budget})", origin)
    check("no_mutation", history == before, where)


def _settings(rng: random.Random) -> dict:
    return {"mode": rng.choice(["unit", "piece"]), "cache_stable": rng.random() < 0.7,
            "agent_unit_tokens": rng.choice([100, 300, 1000]), "pin_user_turn": rng.random() < 0.8}


def _budgets(rng: random.Random, history: list[dict], tokenizer) -> list[int]:
    fixed = split_layout([Message.from_dict(m) for m in history], "agent").fixed
    floor = int((sum(4 + tokenizer.count(m.text) for m in fixed) + 3) / 0.95) + 1
    kind = rng.random()
    if kind < 0.3:  # just above the fixed prompt
        return [floor + rng.randint(0, 300)]
    if kind < 0.5:  # the budget changes between calls
        return [rng.randint(floor, floor + 6000) for _ in range(3)]
    return [rng.randint(max(floor, 300), 12_000)]


@pytest.mark.parametrize("seed", range(int(8 * SCALE)))
def test_generated_agent_histories(seed, tokenizer, hashing_embedder):
    start = len(FAILURES)
    rng = random.Random(seed)
    for case in range(40):
        history = gen.agent_history(rng)
        mem = FlexAMem(flat_config(**_settings(rng)), tokenizer=tokenizer, embedder=hashing_embedder)
        run_calls(mem, history, _budgets(rng, history, tokenizer), rng.choice([0, 0, 50, 400]),
                  f"agent seed {seed} case {case}", edit_rng=rng)
    assert not FAILURES[start:], "\n".join(FAILURES[start:])


@pytest.mark.parametrize("seed", range(int(4 * SCALE)))
def test_generated_conversations(seed, tokenizer, hashing_embedder):
    start = len(FAILURES)
    rng = random.Random(10_000 + seed)
    for case in range(40):
        history = gen.conversation(rng)
        cfg = FlexAMemConfig(history="reader", mode=rng.choice(["unit", "piece"]),
                             tuning=Tuning(reader_unit_tokens=500))
        mem = FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder)
        budgets = [rng.randint(150, 6000) for _ in range(2)]
        for k, budget in enumerate(budgets):
            msgs = [Message.from_dict(m) for m in history]
            try:
                r = mem.render(history, budget=budget)
            except BudgetError as exc:
                check_budget_error(exc, fixed_prompt(msgs, "reader"), [], budget, 0, f"conv {seed}/{case}/{k}")
                continue
            check_render(r, msgs, budget, 0, "reader", f"conversation seed {seed} case {case} budget {budget}",
                         "generated conversation")
    assert not FAILURES[start:], "\n".join(FAILURES[start:])


def _need_data(sub: str) -> Path:
    folder = DATA / sub
    if not folder.is_dir():
        pytest.skip(f"dev data not found at {folder} (a user's machine): real-data part skipped")
    return folder


def test_real_trajectories_rendered_before_every_step(tokenizer, hashing_embedder):
    from flexamem_eval.datasets import load_trajectories

    start = len(FAILURES)
    folder = _need_data("trajectories")
    items = list(load_trajectories(folder / "mini_swe_agent_gemini3pro_dev100.jsonl.gz"))
    # Each trajectory twice: the cache-stable agent default, then another setting in turn
    # (per-call renders, piece mode, a budget changing between calls).
    others = [{"cache_stable": False}, {"mode": "piece"}, {"budgets": [3000, 6000]}, {"pin_user_turn": True}]
    for n, item in enumerate(items):
        history = [m.to_dict() for m in item.messages]
        for settings in ({}, others[n % len(others)]):
            settings = dict(settings)
            budgets = settings.pop("budgets", [(4000, 8000)[n % 2]])
            cfg = FlexAMemConfig(**{"pin_user_turn": False, **settings})
            mem = FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder)
            run_calls(mem, history, budgets, 0, f"trajectory {item.item_id} {settings}", origin="real trajectory")
    assert not FAILURES[start:], "\n".join(FAILURES[start:])


def test_real_conversations_every_question(tokenizer, hashing_embedder):
    from flexamem_eval.datasets import load_locomo, load_longmemeval

    start = len(FAILURES)
    items = []
    if (DATA / "locomo").is_dir():
        items += list(load_locomo(DATA / "locomo" / "locomo10_dev.json"))
    if (DATA / "longmemeval").is_dir():
        lme = list(load_longmemeval(DATA / "longmemeval" / "longmemeval_s_dev60.jsonl.gz"))
        items += lme if SCALE >= 2 else lme[:6]
    if not items:
        _need_data("locomo")
    per_history = None if SCALE >= 2 else 40
    for n, item in enumerate(items):
        mode = "piece" if n % 2 == 0 else "unit"
        mem = FlexAMem(FlexAMemConfig(history="reader", mode=mode), tokenizer=tokenizer, embedder=hashing_embedder)
        history = list(item.history)
        mem.ingest(history, namespace="h", final=True)
        for q in item.questions[:per_history]:
            budget = (2000, 4000, 8000)[len(q.text) % 3]
            r = mem.render_question(q.text, namespace="h", budget=budget)
            check_render(r, [Message(role="user", content=q.text)], budget, 0, "reader",
                         f"{item.history_id} {q.item_id} render_question", "real conversation")
        # The reader path of render(): the history with the question as its current turn.
        q = item.questions[0]
        for budget in (4000, 8000):
            msgs = [*history, Message(role="user", content=q.text)]
            r = mem.render(msgs, namespace="r", budget=budget)
            check_render(r, msgs, budget, 0, "reader", f"{item.history_id} render budget {budget}",
                         "real conversation")
    assert not FAILURES[start:], "\n".join(FAILURES[start:])


def test_enough_cases_were_checked():
    """Runs last in this module: CI must check at least 10,000 renders when the dev data is there."""
    if not DATA.is_dir() or SCALE < 1:
        pytest.skip("the 10,000-render floor applies to the CI setting with the dev data")
    if CHECKED["renders"] == 0:
        pytest.skip("run with the rest of the module to count its renders")
    assert CHECKED["renders"] >= 10_000, dict(CHECKED)
