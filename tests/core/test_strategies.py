"""Recovery strategies: a new one is a class and one registry line, and every tool finds it by name."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from pydantic import ValidationError

from flexamem_core import FlexAMem, FlexAMemConfig, RecoveryStrategy, Tuning, register_strategy, registered_strategies
from flexamem_core.recall.assembly import MemoryRender
from flexamem_core.recall.candidates import Candidate
from flexamem_core.recall.strategies import Plan, RecallCall, Room
from flexamem_core.recall.timeline import Timeline
from flexamem_core.recall.unit_recovery import unit_recovery
from flexamem_tools.bench import synthetic_history


class NewestRaw(RecoveryStrategy):
    """A small strategy: the newest old units shown raw, newest first, while they fit."""

    name = "test-newest-raw"

    def plan(self, call: RecallCall, room: Room) -> Plan:
        newest_first = [Candidate(pos, 1.0, "newest") for pos in reversed(range(len(call.notes)))]

        def recover(timeline: Timeline) -> MemoryRender:
            return unit_recovery(call.notes, timeline, newest_first, room.a_mem - timeline.total, room.allowance,
                                 call.index, call.cfg, call.tokenizer, np.zeros(0), excerpts=False)

        return Plan(call.cfg.tuning.timeline_share * room.size_mem, None, recover)


register_strategy(NewestRaw)  # the one registry line


def test_a_registered_strategy_is_a_mode_and_recovers_what_it_plans(tokenizer, hashing_embedder) -> None:
    assert "test-newest-raw" in registered_strategies()
    mem = FlexAMem(FlexAMemConfig(budget=4000, mode="test-newest-raw", cache_stable=False,
                                  tuning=Tuning(agent_unit_tokens=200)), tokenizer=tokenizer, embedder=hashing_embedder)
    history = synthetic_history(12)
    r = mem.render(history)
    assert r.report["mode"] == "test-newest-raw" and r.tokens <= mem.config.effective_budget
    rows = {row["position"]: row for row in r.report["units"]}
    newest_old = r.report["old_units"] - 1
    assert rows[newest_old]["resolution"] == "raw" and rows[newest_old]["why"] == "newest"
    raw = [row for row in rows.values() if row["resolution"] == "raw"]
    assert len(raw) >= 1 and all(row["position"] >= newest_old - len(raw) + 1 for row in raw)  # newest first
    unit = mem.store.get_unit("default", rows[newest_old]["unit"])
    assert unit.raw in r.memory_text


def test_unknown_modes_and_bad_classes_are_clear_errors() -> None:
    with pytest.raises(ValidationError, match=r"unknown recovery mode .nope.*auto, piece, unit"):
        FlexAMemConfig(mode="nope")

    class Nameless(RecoveryStrategy):
        def plan(self, call: RecallCall, room: Room) -> Plan:
            raise NotImplementedError

    with pytest.raises(ValueError, match="name"):
        register_strategy(Nameless)
    with pytest.raises(TypeError, match="RecoveryStrategy"):
        register_strategy(dict)  # type: ignore[arg-type]


def test_installed_strategies_load_by_name_through_their_entry_points() -> None:
    code = ("import sys; from flexamem_core import FlexAMemConfig; assert 'flexamem_eval' not in sys.modules; "
            "print(FlexAMemConfig(mode='timeline-only').mode, 'flexamem_eval.strategies' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["timeline-only", "True"]


def test_the_bench_the_replay_and_the_eval_offer_every_registered_strategy() -> None:
    import argparse

    from flexamem_minisweagent.replay import configure as replay_options

    from flexamem_eval.methods import method_class
    from flexamem_tools.bench import configure as bench_options

    for configure in (replay_options, bench_options):
        parser = argparse.ArgumentParser()
        configure(parser)
        modes = next(a for a in parser._actions if a.dest in ("mode", "modes"))
        assert "test-newest-raw" in modes.choices and "auto" in modes.choices
    method = method_class("flexamem-test-newest-raw")
    assert method.name == "flexamem-test-newest-raw" and method.switches["agent"]["mode"] == "test-newest-raw"


def test_old_flat_settings_still_work_for_one_release_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match="tuning=Tuning"):
        cfg = FlexAMemConfig(timeline_share=0.3, agent_unit_tokens=500)
    assert cfg.tuning.timeline_share == 0.3 and cfg.tuning.agent_unit_tokens == 500
    with pytest.warns(DeprecationWarning, match="tuning.timeline_share"):
        assert cfg.timeline_share == 0.3
    with pytest.warns(DeprecationWarning, match="timeline-only"):
        assert FlexAMemConfig(mode="unit", recovery=False).mode == "timeline-only"
