"""End to end: mini-swe-agent's DefaultAgent, its DeterministicModel and its LocalEnvironment
running real shell commands, with FlexAMemModel rendering every query at a 2,500-token budget.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mswea_fakes as fakes
import pytest
from flexamem_minisweagent import FlexAMemModel, is_memory_dict, to_core
from flexamem_minisweagent.replay import replay_steps
from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from mswea_checks import assert_valid_structure, memory_index, memory_text, plain

from flexamem_core import FlexAMem
from flexamem_core.recall.joins import PIECES_HEADER

BUDGET = 2500
B_BAR = int(BUDGET * 0.95)
FORMAT_ERROR_AFTER = 5


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("mswea_text")
    inner = fakes.RecordingDeterministicModel(outputs=fakes.text_outputs(format_error_after=FORMAT_ERROR_AFTER))
    model = FlexAMemModel(inner=inner, flexamem={"budget": BUDGET})
    agent = DefaultAgent(model, LocalEnvironment(cwd=str(work)), system_template="You are a shell agent.",
                         instance_template="Task: {{task}}", step_limit=40, cost_limit=0,
                         output_path=work / "run.traj.json")
    info = agent.run(fakes.TASK)
    return {"agent": agent, "model": model, "inner": inner, "info": info, "traj": work / "run.traj.json"}


def _calls(run: dict[str, Any]) -> list[tuple[list[dict], list[dict], dict]]:
    """(what the inner model received, the agent's history at that call, the flexamem extra)."""
    messages = run["agent"].messages
    outputs = [m for m in messages if "flexamem" in (m.get("extra") or {})]
    assert len(outputs) == len(run["inner"].received)
    return [(received, messages[:out["extra"]["flexamem"]["messages_in"]], out["extra"]["flexamem"])
            for received, out in zip(run["inner"].received, outputs)]


def test_run_completes_and_the_saved_trajectory_is_complete(run: dict[str, Any]) -> None:
    assert run["info"]["exit_status"] == "Submitted"
    assert fakes.SECRET in run["info"]["submission"]
    saved = json.loads(Path(run["traj"]).read_text())
    messages = saved["messages"]
    assert messages == json.loads(json.dumps(run["agent"].messages))
    assert not any(is_memory_dict(m) for m in messages)
    # system, task, every command with its complete output, the format error, the exit record
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    commands = [m["extra"]["actions"][0]["command"] for m in messages if m["role"] == "assistant"]
    assert commands == [*fakes.VERBOSE_COMMANDS, f"{fakes.SUBMIT} && echo {fakes.SECRET}"]
    text = "\n".join(str(m["content"]) for m in messages)
    for line in ("inventory line 80", "log entry 59: checking module_59", "MAGIC_TOKEN=zebra-4521",
                 "test_case_69 PASSED", "checksum 260"):
        assert line in text
    errors = [m for m in messages if m.get("extra", {}).get("interrupt_type") == "FormatError"]
    assert len(errors) == 1 and errors[0]["content"] == fakes.FORMAT_ERROR_TEXT
    assert messages[-1]["role"] == "exit"
    assert saved["info"]["flexamem"]["queries"] == len(run["inner"].received)


def test_the_model_received_the_rendered_memory_not_the_full_history(run: dict[str, Any]) -> None:
    memory = run["model"].memory
    rendered_calls = 0
    recovered_calls = 0
    memories: list[str] = []
    for received, history, info in _calls(run):
        assert_valid_structure(received, history)
        full = memory.count_messages(to_core(history).messages)
        sent = memory.count_messages(to_core(received).messages)
        assert sent == info["tokens"] <= B_BAR
        if full <= B_BAR:
            assert info["passthrough"] and [plain(m) for m in received] == [plain(m) for m in history]
            continue
        rendered_calls += 1
        assert not info["passthrough"] and len(received) < len(history)
        at = memory_index(received)
        text = memory_text(received[at])
        memories.append(text)
        assert text.startswith("<memory>") and text.rstrip().endswith("</memory>")
        # the recent window is the tail of the history, unchanged
        window = received[at + 1:]
        assert [plain(m) for m in window] == [plain(m) for m in history[len(history) - len(window):]]
        # the timeline shows a record of every unit the report lists as shown, and the
        # recovered units are there verbatim
        units = info["report"]["units"]
        head = received[2:at]  # the oldest units, where they were first sent (report["head_units"])
        assert len(head) == info["report"].get("head_messages", 0)
        shown = units[info["report"].get("head_units", 0):]
        for unit in shown:
            if unit["resolution"] in ("record", "excerpt", "raw"):
                assert f"[{unit['label']}]" in text
        if any(u["resolution"] in ("raw", "excerpt") or u.get("pieces") for u in shown):
            recovered_calls += 1
            assert "(raw)" in text or "(excerpt)" in text or PIECES_HEADER in text
    assert rendered_calls >= 5
    # the automatic mode's cache-stable request recovers only what a human turn asks for: a run
    # of commands alone is shown as its trace, with what each output revealed
    assert recovered_calls == 0
    assert any(fakes.SECRET in t for t in memories), "the step that wrote the token is in the memory"


def test_extra_carries_the_report_and_the_cost(run: dict[str, Any]) -> None:
    namespaces = set()
    for _, _, info in _calls(run):
        namespaces.add(info["namespace"])
        assert info["budget"] == BUDGET
        assert info["report"]["budget"] == BUDGET
        assert info["cost"] == 0.0 and info["llm_calls"] == 0  # rule writer: no LLM spend
        json.dumps(info)  # JSON-serialisable, as the trajectory needs
    assert len(namespaces) == 1
    outputs = [m for m in run["agent"].messages if m["role"] == "assistant"]
    assert all(m["extra"]["cost"] == pytest.approx(0.01) for m in outputs)
    assert run["agent"].cost == pytest.approx(0.01 * (len(outputs) + 1))  # + the format error's cost


def test_replay_reproduces_what_the_model_received(run: dict[str, Any]) -> None:
    saved = json.loads(Path(run["traj"]).read_text())
    memory = FlexAMem(run["model"].memory.config)
    steps = replay_steps(saved, BUDGET, memory=memory)
    received = run["inner"].received
    assert len(steps) == len(received)  # every model call, the format error's included
    for step, live in zip(steps, received):
        assert step["sent"] == [plain(m) for m in json.loads(json.dumps(live))]
