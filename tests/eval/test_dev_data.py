"""The shared development files load completely; skipped where the data folder is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from flexamem_eval.actions import trajectory_targets
from flexamem_eval.datasets import load
from flexamem_eval.runner import Spec, evaluate_item

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
LME = DATA / "longmemeval" / "longmemeval_s_dev60.jsonl.gz"
LOCOMO = DATA / "locomo" / "locomo10_dev.json"
TRAJ = DATA / "trajectories" / "mini_swe_agent_gemini3pro_dev100.jsonl.gz"

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared data folder absent")


def dev_slices(tokenizer, embedder):
    """An eval environment, the first dev trajectory and the first LoCoMo dev conversation."""
    from flexamem_eval.methods.base import Env

    env = Env(tokenizer=tokenizer, embedder_factory=lambda: embedder)
    return env, load("trajectories", TRAJ, limit=1)[0], load("locomo", LOCOMO, limit=40)[0]


@needs_data
def test_longmemeval_dev_loads_with_evidence():
    items = load("longmemeval", LME)
    assert len(items) == 60
    qs = [q for it in items for q in it.questions]
    assert sum(q.abstention for q in qs) == 3
    assert sum(len(q.evidence) for q in qs) == 113
    for it in items:
        assert all(t in it.turn_text for q in it.questions for t in q.evidence)


@needs_data
def test_locomo_dev_loads_every_question_and_evidence_id():
    items = load("locomo", LOCOMO)
    assert [it.history_id for it in items] == ["conv-26", "conv-30", "conv-41", "conv-42"]
    assert sum(len(it.questions) for it in items) == 757
    with_evidence = [q for it in items for q in it.questions if q.evidence]
    assert len(with_evidence) >= 750


@needs_data
def test_trajectories_dev_loads_with_reused_details():
    items = load("trajectories", TRAJ)
    assert len(items) == 100 and len({t.item_id for t in items}) == 100
    targets = [t for it in items[:20] for t in trajectory_targets(it.messages)]
    share = sum(1 for t in targets if t.reused) / len(targets)
    assert 0.05 < share < 0.3, share  # about 13% of steps reuse a detail (data README)


@needs_data
def test_full_shows_every_evidence_turn_truncation_few(tokenizer):
    from flexamem_core import FlexAMemConfig
    from flexamem_eval.methods.base import Env

    item = load("longmemeval", LME, limit=1)[0]
    env = Env(tokenizer=tokenizer, config=FlexAMemConfig())
    res = evaluate_item(item, Spec("longmemeval", (8000,), ("full", "truncation")), env)
    by = {r.method: r for r in res.renders}
    assert by["full"].evidence_full == by["full"].evidence_turns > 0
    assert by["truncation"].tokens <= env.effective(8000) < by["full"].tokens
