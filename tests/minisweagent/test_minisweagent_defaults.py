"""The budget from the model config where litellm knows the model, explicit budgets winning,
and a logged default otherwise; a real DefaultAgent run on the deterministic model."""

from __future__ import annotations

import logging
from pathlib import Path

import mswea_fakes as fakes
from flexamem_minisweagent import FlexAMemModel
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel

from flexamem_core import FlexAMem, FlexAMemConfig, logs
from flexamem_core.host import FALLBACK_BUDGET, window_budget


def test_a_litellm_model_gives_its_input_window(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="flexamem")
    inner = LitellmModel(model_name="anthropic/claude-sonnet-4-5-20250929")
    model = FlexAMemModel(inner=inner)
    import litellm

    window = litellm.model_cost["claude-sonnet-4-5-20250929"]["max_input_tokens"]
    assert model.budget == window_budget(window) == model.memory.config.budget
    assert FlexAMemModel(inner=inner, flexamem={"budget": 3000}).budget == 3000  # explicit wins
    configured = FlexAMem(FlexAMemConfig(budget=5000))
    assert FlexAMemModel(inner=inner, memory=configured).budget == 5000
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_an_unknown_model_runs_on_the_logged_default(tmp_path: Path, caplog) -> None:
    logs._warned.discard("minisweagent-default-budget")
    caplog.set_level(logging.WARNING, logger="flexamem")
    inner = fakes.RecordingDeterministicModel(outputs=fakes.text_outputs(format_error_after=5))
    model = FlexAMemModel(inner=inner)
    FlexAMemModel(inner=inner)  # a second model: no second warning
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path)), system_template="You are a shell agent.",
                         instance_template="Task: {{task}}", step_limit=40, cost_limit=0)
    agent.run(fakes.TASK)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "flexamem.budget" in warning
    infos = [m["extra"]["flexamem"] for m in agent.messages if "flexamem" in (m.get("extra") or {})]
    assert infos and {i["budget"] for i in infos} == {FALLBACK_BUDGET}
    assert model.serialize()["info"]["flexamem"]["budget"] == FALLBACK_BUDGET
