"""The config route (yaml + ``-c key=value``), tool-calling and Responses-API histories, the
agent subclass, and clear errors for bad configuration and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mswea_fakes as fakes
import pytest
import yaml
from flexamem_minisweagent import FlexAMemAgent, FlexAMemModel, is_memory_dict, to_core
from minisweagent.agents import get_agent
from minisweagent.agents.default import DefaultAgent
from minisweagent.config import get_config_from_spec
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models import get_model
from minisweagent.models.test_models import DeterministicToolcallModel
from minisweagent.utils.serialize import recursive_merge
from mswea_checks import assert_valid_structure, memory_index, memory_text, plain, role_of
from pydantic import ValidationError

from flexamem_core import BudgetError, MessageError

MODEL_CLASS = "flexamem_minisweagent.FlexAMemModel"


def _check_calls(agent: Any, inner: Any, model: FlexAMemModel) -> int:
    """Structure and budget of every call; returns how many calls received a memory."""
    outputs = [m for m in agent.messages if "flexamem" in (m.get("extra") or {})]
    assert len(outputs) == len(inner.received) > 0
    with_memory = 0
    for received, out in zip(inner.received, outputs):
        info = out["extra"]["flexamem"]
        history = agent.messages[:info["messages_in"]]
        assert_valid_structure(received, history)
        sent = model.memory.count_messages(to_core(received).messages, extra_tokens=info["tool_schema_tokens"])
        assert sent == info["tokens"] <= int(info["budget"] * 0.95)
        if any(is_memory_dict(m) for m in received):
            with_memory += 1
            assert len(received) < len(history)
            assert memory_text(received[memory_index(received)]).startswith("<memory>")
    return with_memory


def test_yaml_config_with_overrides_runs_a_tool_calling_agent(tmp_path: Path) -> None:
    config_file = tmp_path / "flexamem.yaml"
    config_file.write_text(yaml.safe_dump({
        "agent": {"system_template": "You run shell commands.", "instance_template": "{{task}}",
                  "step_limit": 30, "cost_limit": 0, "output_path": str(tmp_path / "run.traj.json")},
        "environment": {"environment_class": "local", "cwd": str(tmp_path)},
        "model": {"model_class": MODEL_CLASS, "inner_model_class": "mswea_fakes.RecordingDeterministicToolcallModel",
                  "model_name": "fake-toolcall", "outputs": fakes.toolcall_outputs(parallel=2),
                  "flexamem": {"budget": 4000}},
    }))
    specs = [str(config_file), "model.flexamem.budget=2500", "model.flexamem.window_share=0.3"]
    config = recursive_merge(*(get_config_from_spec(s) for s in specs))
    model = get_model(config=config["model"])
    assert isinstance(model, FlexAMemModel)
    assert model.settings.budget == 2500 and model.memory.config.tuning.window_share == 0.3
    assert model.config.model_name == "fake-toolcall"  # the runners read the inner model's config
    agent = get_agent(model, LocalEnvironment(cwd=str(tmp_path)), config["agent"], default_type="default")
    info = agent.run(fakes.TASK)
    assert info["exit_status"] == "Submitted"
    assert _check_calls(agent, model.inner, model) >= 2
    saved = json.loads((tmp_path / "run.traj.json").read_text())
    calls = [c["id"] for m in saved["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    results = [m["tool_call_id"] for m in saved["messages"] if m["role"] == "tool"]
    assert results == calls[:-1]  # every command's result is saved; the submission ends the run
    assert saved["info"]["config"]["model_type"] == "flexamem_minisweagent.model.FlexAMemModel"
    assert saved["info"]["config"]["inner_model_type"].endswith("RecordingDeterministicToolcallModel")
    assert saved["info"]["config"]["flexamem"]["budget"] == 2500
    assert model.extra_tokens() > 0  # the bash tool schema is counted in the budget


RESPONSE_COMMANDS = ["seq 1 300", "seq 1000 1300", "echo MAGIC_TOKEN=zebra-4521 > settings.env && cat settings.env",
                     "seq 5 5 1500", "seq 3000 3300", "seq 7 7 2100"]


def test_agent_subclass_with_a_responses_api_model(tmp_path: Path) -> None:
    inner = fakes.RecordingDeterministicResponseModel(outputs=fakes.response_outputs(RESPONSE_COMMANDS))
    agent = FlexAMemAgent(inner, LocalEnvironment(cwd=str(tmp_path)), budget=2000,
                          system_template="You run shell commands.", instance_template="{{task}}",
                          step_limit=30, cost_limit=0)
    info = agent.run(fakes.TASK, instance_id="demo__repo-7")
    assert info["exit_status"] == "Submitted"
    model = agent.flexamem_model
    assert model.current_namespace.startswith("mswea-demo__repo-7-")
    assert _check_calls(agent, inner, model) >= 2
    memories = [m for r in inner.received for m in r if is_memory_dict(m)]
    assert all(m["type"] == "message" and m["content"][0]["type"] == "input_text" for m in memories)
    assert [role_of(m) for m in agent.messages].count("tool") == len(RESPONSE_COMMANDS)


def test_agent_class_from_config_takes_the_flexamem_section(tmp_path: Path) -> None:
    inner = DeterministicToolcallModel(outputs=fakes.toolcall_outputs(["seq 1 5"], parallel=1))
    agent = get_agent(inner, LocalEnvironment(cwd=str(tmp_path)), {
        "agent_class": "flexamem_minisweagent.FlexAMemAgent", "flexamem": {"budget": 3000},
        "system_template": "s", "instance_template": "{{task}}", "cost_limit": 0})
    assert isinstance(agent, FlexAMemAgent) and agent.flexamem_model.settings.budget == 3000
    assert agent.run("print five numbers")["exit_status"] == "Submitted"
    assert agent.messages[0] is not None and agent.flexamem_model.stats["queries"] == 2


def _wrapped(**flexamem: Any) -> FlexAMemModel:
    return FlexAMemModel(inner=DeterministicToolcallModel(outputs=[]), flexamem=flexamem)


def test_bad_configuration_is_reported_clearly() -> None:
    with pytest.raises(ValidationError, match="budgte"):
        _wrapped(budgte=100)
    with pytest.raises(ValidationError, match="budget"):
        _wrapped(budget=0)
    with pytest.raises(ValueError, match="real model class"):
        FlexAMemModel(inner_model_class=MODEL_CLASS, model_name="x")
    with pytest.raises(ValueError, match="Unknown model class"):
        FlexAMemModel(inner_model_class="no.such.Model", model_name="x")
    with pytest.raises(ValueError, match="either"):
        FlexAMemModel(inner=DeterministicToolcallModel(outputs=[]), outputs=[])
    with pytest.raises(ValueError, match="namespace"):
        _wrapped(namespace="bad namespace!")
    with pytest.raises(ValueError, match="already a FlexAMemModel"):
        FlexAMemAgent(_wrapped(), LocalEnvironment(), budget=10, system_template="s", instance_template="t")


def test_bad_messages_are_reported_with_their_position() -> None:
    model = _wrapped(budget=1000)
    with pytest.raises(MessageError, match="message 1"):
        model.query([{"role": "system", "content": "s"}, "not a dict"])
    with pytest.raises(MessageError, match="message 2"):
        model.query([{"role": "system", "content": "s"}, {"role": "user", "content": "t"},
                     {"role": "wizard", "content": "?"}])
    with pytest.raises(MessageError, match="Responses-API item"):
        model.query([{"type": "mystery_item"}])


def test_a_budget_too_small_for_the_prompt_is_a_clear_error() -> None:
    model = _wrapped(budget=50)
    history = [{"role": "system", "content": "word " * 200}, {"role": "user", "content": "task"}]
    with pytest.raises(BudgetError, match="too small"):
        model.query(history)
    assert [plain(m) for m in history] == history  # nothing was changed on the way


def test_an_llm_record_writer_s_cost_is_counted_by_the_run(tmp_path: Path) -> None:
    reply = json.dumps({"record": "ran a command that printed many lines", "keywords": ["command"]})
    inner = fakes.RecordingDeterministicModel(outputs=fakes.text_outputs(fakes.VERBOSE_COMMANDS[:6]))
    model = FlexAMemModel(inner=inner, flexamem={
        "budget": 2000, "writer_model": "gpt-4o-mini", "writer_model_kwargs": {"mock_response": reply}})
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(tmp_path)), system_template="s",
                         instance_template="{{task}}", cost_limit=0)
    assert agent.run(fakes.TASK)["exit_status"] == "Submitted"
    infos = [m["extra"]["flexamem"] for m in agent.messages if m["role"] == "assistant"]
    writer = model._writer_chat
    assert writer is not None and writer.calls > 0 and writer.cost > 0
    assert sum(i["llm_calls"] for i in infos) == writer.calls
    assert sum(i["cost"] for i in infos) == pytest.approx(writer.cost)
    assert agent.cost == pytest.approx(0.01 * len(infos) + writer.cost)
    # The memory follows the oldest units a cache-stable head keeps verbatim, wherever they end.
    assert any("ran a command that printed many lines" in memory_text(m) for r in inner.received
               for m in r if is_memory_dict(m))


def test_summary_reports_and_a_persistent_store(tmp_path: Path) -> None:
    from flexamem_core.stores import open_store

    url = f"sqlite:///{tmp_path / 'memory.db'}"
    model = _wrapped(budget=2000, report="summary", store=url, namespace="run-1")
    sent, info = model.render(fakes.long_history(steps=10))
    assert not info["passthrough"] and any(is_memory_dict(m) for m in sent)
    assert "units" not in info["report"] and info["report"]["budget"] == 2000
    assert "run-1" in open_store(url).namespaces()  # the notes are on disk


def test_each_run_of_a_task_gets_its_own_namespace() -> None:
    model = _wrapped(budget=4000)

    def history(task: str, steps: int) -> list[dict[str, Any]]:
        msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": task}]
        for n in range(steps):
            msgs += [{"role": "assistant", "content": f"```mswea_bash_command\nls {n}\n```"},
                     {"role": "user", "content": f"out {n}"}]
        return msgs

    def namespace(task: str, steps: int) -> str:
        return model.render(history(task, steps))[1]["namespace"]

    a = namespace("task A", 0)
    assert namespace("task A", 1) == namespace("task A", 2) == a  # one run, growing
    b = namespace("task B", 0)
    assert b != a
    assert namespace("task A", 3) == a  # agents taking turns keep their memory
    assert namespace("task B", 1) == b
    assert namespace("task A", 0) not in (a, b)  # a new run of task A starts a new memory
