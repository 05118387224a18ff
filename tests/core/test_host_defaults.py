"""The budget rule every adapter shares (``flexamem_core.host.defaults``): the budget of a known
input window, fractions, the fallback and its one WARNING, and unit sizes capped for a budget."""

from __future__ import annotations

import logging

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig, logs
from flexamem_core.config import Tuning
from flexamem_core.host import (
    FALLBACK_BUDGET,
    INPUT_SHARE,
    UNITS_PER_BUDGET,
    BudgetError,
    check_fraction,
    config_for_budget,
    default_budget,
    window_budget,
)

DEFAULTS = FlexAMemConfig()


def _units(config: FlexAMemConfig) -> tuple[int, int]:
    return config.tuning.agent_unit_tokens, config.tuning.reader_unit_tokens


def test_the_budget_is_a_share_of_the_input_window() -> None:
    assert INPUT_SHARE == 0.75  # ChatMemoryBuffer's share of an LLM's context window
    assert window_budget(16_000) == 12_000
    assert window_budget(16_385) == int(16_385 * INPUT_SHARE)
    assert window_budget(16_000, 0.5) == 8_000
    assert window_budget(16_000, 1) == 16_000
    assert window_budget(1) == 1  # never zero
    for bad in (0, -100, None, True, 1.5, "16000"):
        with pytest.raises(BudgetError, match="input_tokens"):
            window_budget(bad)  # type: ignore[arg-type]


def test_a_fraction_is_a_share_in_zero_to_one() -> None:
    assert check_fraction(1) == 1.0 and isinstance(check_fraction(1), float)
    assert check_fraction(0.25) == 0.25
    for bad in (0, -0.5, 1.01, 2, True, "0.5", float("nan")):
        with pytest.raises(ValueError, match=r"\(0, 1\]"):
            check_fraction(bad)
        with pytest.raises(BudgetError):
            window_budget(10_000, bad)  # type: ignore[arg-type]
    with pytest.raises(BudgetError):
        check_fraction(None)


def test_an_unknown_window_falls_back_with_one_warning_per_adapter(caplog: pytest.LogCaptureFixture) -> None:
    for adapter in ("test-host-a", "test-host-b"):
        logs._warned.discard(f"{adapter}-default-budget")
    caplog.set_level(logging.WARNING, logger="flexamem")
    assert DEFAULTS.budget == FALLBACK_BUDGET
    assert default_budget(16_000, adapter="test-host-a", model="m", hint="h") == window_budget(16_000)
    assert not caplog.records  # a known window is no reason to warn
    for _ in range(3):
        assert default_budget(None, adapter="test-host-a", model="TheModel", hint="pass budget=<tokens>",
                              log=logging.getLogger("flexamem.test")) == FALLBACK_BUDGET
    (warning,) = caplog.records
    text = warning.getMessage()
    assert warning.levelno == logging.WARNING and warning.name == "flexamem.test"
    assert "no budget given" in text and "TheModel" in text and "pass budget=<tokens>" in text
    assert f"{FALLBACK_BUDGET} tokens" in text
    default_budget(None, adapter="test-host-b", model="Other", hint="h")
    assert len(caplog.records) == 2 and caplog.records[1].name == "flexamem"


def test_unit_sizes_are_capped_at_small_budgets_and_never_grow() -> None:
    agent, reader = UNITS_PER_BUDGET["agent_unit_tokens"], UNITS_PER_BUDGET["reader_unit_tokens"]
    assert agent > reader  # agent units are re-sent whole by an extension: smaller ones
    assert _units(config_for_budget(1_000)) == (1_000 // agent, 1_000 // reader)
    assert _units(config_for_budget(6_000)) == (6_000 // agent, 6_000 // reader)  # both below their own
    assert _units(config_for_budget(8_000)) == (DEFAULTS.tuning.agent_unit_tokens, 8_000 // reader)
    assert _units(config_for_budget(100_000)) == _units(DEFAULTS)  # never above the config's own
    assert _units(config_for_budget(3)) == (1, 1)
    config = config_for_budget(2_000, history="reader", mode="piece")
    assert (config.budget, config.history, config.mode) == (2_000, "reader", "piece")
    for bad in (0, -1, None, True):
        with pytest.raises(BudgetError, match="budget"):
            config_for_budget(bad)  # type: ignore[arg-type]


def test_explicit_unit_sizes_and_settings_win() -> None:
    given = config_for_budget(1_000, tuning=Tuning(agent_unit_tokens=900))
    assert _units(given) == (900, 1_000 // UNITS_PER_BUDGET["reader_unit_tokens"])
    own = FlexAMemConfig(cache_stable=False, tuning=Tuning(reader_unit_tokens=700, seeds=4))
    config = config_for_budget(1_000, own)
    assert _units(config) == (1_000 // UNITS_PER_BUDGET["agent_unit_tokens"], 700)
    assert config.cache_stable is False and config.tuning.seeds == 4 and config.budget == 1_000
    assert _units(config_for_budget(1_000, config)) == _units(config)  # sizing twice changes nothing


def _agent_history(steps: int) -> list[dict]:
    history = [{"role": "user", "content": "Summarise the logs."}]
    for n in range(steps):
        history.append({"role": "assistant", "content": f"Reading log {n}.",
                        "tool_calls": [{"id": f"c{n}", "type": "function",
                                        "function": {"name": "cat", "arguments": f'{{"path": "log{n}"}}'}}]})
        history.append({"role": "tool", "tool_call_id": f"c{n}",
                        "content": "\n".join(f"log {n} line {i}: ok" for i in range(12))})
    return history


def test_a_memory_on_a_capped_config_packs_smaller_units(tokenizer, hashing_embedder) -> None:
    units = {}
    for name, config in (("capped", config_for_budget(800, cache_stable=False)),
                         ("library", FlexAMemConfig(budget=800, cache_stable=False))):
        mem = FlexAMem(config, tokenizer=tokenizer, embedder=hashing_embedder)
        rendered = mem.render(_agent_history(30), namespace=name)
        assert not rendered.passthrough and rendered.report["budget"] == 800
        units[name] = mem.state(name).units
    cap = config_for_budget(800).tuning.agent_unit_tokens
    assert cap == 800 // UNITS_PER_BUDGET["agent_unit_tokens"]
    closed = units["capped"][:-1]  # steps are packed until a unit reaches its size
    assert all(cap <= u.tokens < DEFAULTS.tuning.agent_unit_tokens for u in closed)
    assert len(units["capped"]) > len(units["library"])
