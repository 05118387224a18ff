"""``flexamem replay``: a saved trajectory rendered at every model call for a budget."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from mswea_checks import assert_valid_structure, assert_window_is_tail

from flexamem_tools.cli import main

SHARED = Path("/work/shared/data/trajectories/mini_swe_agent_gemini3pro_dev100.jsonl.gz")
BUDGET = 1500


def _output(step: int, lines: int) -> str:
    body = "\n".join(f"[{step}] record {i}: value={i * step} path=/srv/app/module_{i % 5}.py ok" for i in range(lines))
    return f"<returncode>0</returncode>\n<output>\n{body}\n</output>"


def v2_toolcall_trajectory(steps: int = 8) -> dict[str, Any]:
    """A v2 (``mini-swe-agent-1.1``) tool-calling run, with one format error and the exit record."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a shell agent.", "extra": {}},
        {"role": "user", "content": "Fix the crash in module_3 and report the value of record 7.", "extra": {}}]
    for n in range(1, steps + 1):
        calls = [{"id": f"c{n}_{k}", "type": "function",
                  "function": {"name": "bash", "arguments": json.dumps({"command": f"inspect {n} {k}"})}}
                 for k in range(2)]
        messages.append({"role": "assistant", "content": f"Inspecting part {n}.", "tool_calls": calls,
                         "extra": {"actions": [], "cost": 0.01}})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": _output(n, 8), "extra": {}}
                     for c in calls]
        if n == 4:
            messages.append({"role": "user", "content": "Tool call error: no tool calls found.",
                             "extra": {"interrupt_type": "FormatError", "cost": 0.01}})
    messages.append({"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}})
    return {"info": {"config": {"model_type": "minisweagent.models.litellm_model.LitellmModel"}},
            "messages": messages, "trajectory_format": "mini-swe-agent-1.1", "instance_id": "demo__app-1"}


def v1_text_trajectory(instance_id: str, steps: int = 7) -> dict[str, Any]:
    """A v1 (``mini-swe-agent-1``) text-action run: commands in code blocks, outputs as user."""
    messages = [{"role": "system", "content": "Reply with one bash block."},
                {"role": "user", "content": f"<pr_description>Fix {instance_id}</pr_description>"}]
    for n in range(1, steps + 1):
        messages.append({"role": "assistant", "content": f"THOUGHT: look.\n\n```bash\ncat part_{n}.log\n```"})
        messages.append({"role": "user", "content": _output(n, 30)})
    return {"info": {"config": {"model_type": "minisweagent.models.openrouter_model.OpenRouterModel"}},
            "messages": messages, "trajectory_format": "mini-swe-agent-1", "instance_id": instance_id}


def _replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["replay", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def v2_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "demo.traj.json"
    path.write_text(json.dumps(v2_toolcall_trajectory(), indent=1))
    return path


@pytest.fixture(scope="module")
def v2_steps(v2_file: Path) -> list[dict[str, Any]]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["replay", str(v2_file), "--budget", str(BUDGET), "--json"]) == 0
    return json.loads(buf.getvalue())["steps"]


def test_every_model_call_is_rendered_within_the_budget(v2_file: Path, v2_steps: list[dict[str, Any]]) -> None:
    messages = json.loads(v2_file.read_text())["messages"]
    calls = [k for k, m in enumerate(messages) if m["role"] == "assistant"
             or m.get("extra", {}).get("interrupt_type") == "FormatError"]
    assert [s["message_index"] for s in v2_steps] == calls
    assert [s["step"] for s in v2_steps] == list(range(1, len(calls) + 1))
    assert v2_steps[0]["passthrough"] and v2_steps[0]["memory_text"] is None
    for step in v2_steps:
        history = messages[:step["message_index"]]
        sent = step["sent"]
        assert step["tokens"] <= BUDGET * 0.95
        assert_valid_structure(sent, history)
        if not step["passthrough"]:
            assert step["history_tokens"] > BUDGET * 0.95
            assert len(sent) < len(history)
        if step["memory_text"]:
            at = next(i for i, m in enumerate(step["rendered"]) if m.get("metadata") == {"flexamem": "memory"})
            assert step["rendered"][at]["metadata"] == {"flexamem": "memory"}
            assert sent[at]["content"] == step["memory_text"] and step["memory_text"].startswith("<memory>")
            assert_window_is_tail(sent[at + 1:], history)
            assert step["report"]["budget"] == BUDGET
    assert sum(s["memory_text"] is not None for s in v2_steps) >= 3


def test_one_step_is_the_same_as_in_the_full_replay(capsys: pytest.CaptureFixture[str], v2_file: Path,
                                                    v2_steps: list[dict[str, Any]]) -> None:
    n = len(v2_steps)
    rc, out, _ = _replay(capsys, str(v2_file), "--budget", str(BUDGET), "--step", str(n), "--json")
    assert rc == 0
    only = json.loads(out)["steps"]
    assert len(only) == 1 and only[0] == v2_steps[-1]


def test_text_output_shows_each_step_and_the_report(capsys: pytest.CaptureFixture[str], v2_file: Path,
                                                    v2_steps: list[dict[str, Any]]) -> None:
    rc, out, _ = _replay(capsys, str(v2_file), "--budget", str(BUDGET), "--step", str(len(v2_steps)),
                         "--max-chars", "300")
    assert rc == 0
    legend, out = out.split("\n", 1)
    assert legend.startswith("Each step:") and "cached:" in legend and "cost:" in legend
    assert out.startswith(f"=== step {len(v2_steps)} ")
    assert "--- [memory user]" in out and "<memory>" in out and "--- report: {" in out
    assert "more characters]" in out  # --max-chars cut the long outputs
    rc, out, _ = _replay(capsys, str(v2_file), "--budget", str(BUDGET), "--summary")
    assert rc == 0
    lines = out.splitlines()[1:]  # after the legend
    assert len(lines) == len(v2_steps) + 1 and all(line.startswith("=== step ") for line in lines[:-1])
    assert lines[0].endswith("[passthrough] ===") and lines[-2].endswith("[memory] ===")
    assert f"cached 0, cost {v2_steps[0]['cost']:,.1f} [passthrough]" in lines[0]
    assert f"cached {v2_steps[1]['cached_tokens']:,}, cost {v2_steps[1]['cost']:,.1f}" in lines[1]
    assert lines[-1].startswith(f"=== prompt cache over {len(v2_steps)} calls: cached_prefix_share ")
    assert "cost_per_call" in lines[-1]


def test_steps_carry_cached_tokens_and_the_run_totals(capsys: pytest.CaptureFixture[str], v2_file: Path,
                                                      v2_steps: list[dict[str, Any]]) -> None:
    rc, out, _ = _replay(capsys, str(v2_file), "--budget", str(BUDGET), "--json")
    assert rc == 0
    data = json.loads(out)
    steps, totals = data["steps"], data["totals"]
    assert steps == v2_steps
    assert steps[0]["cached_tokens"] == 0 and steps[0]["cost"] == pytest.approx(1.25 * steps[0]["tokens"], abs=1e-3)
    for prev, step in zip(steps, steps[1:]):
        assert 0 < step["cached_tokens"] <= step["tokens"]
        new = step["tokens"] - step["cached_tokens"]
        assert step["cost"] == pytest.approx(0.1 * step["cached_tokens"] + 1.25 * new, abs=1e-3)
        if prev["passthrough"] and step["passthrough"]:  # append-only: the whole previous call is cached
            assert step["cached_tokens"] == prev["tokens"]
    assert any(s["cached_tokens"] < s["tokens"] * 0.9 for s in steps[1:] if not s["passthrough"])
    assert totals["calls"] == len(steps)
    assert totals["tokens"] == sum(s["tokens"] for s in steps)
    assert totals["cached_tokens"] == sum(s["cached_tokens"] for s in steps)
    assert totals["cached_prefix_share"] == pytest.approx(totals["cached_tokens"] / totals["tokens"], abs=1e-6)
    assert totals["cost_per_call"] == pytest.approx(sum(s["cost"] for s in steps) / len(steps), abs=0.01)
    assert totals["price_model"]["cached_token"] == 0.1 and totals["price_model"]["new_token"] == 1.25
    rc, out, _ = _replay(capsys, str(v2_file), "--budget", str(BUDGET), "--json", "--step", "3")
    assert json.loads(out)["totals"]["calls"] == 3, "totals over the calls rendered up to --step"


def test_v1_collections_need_a_selection(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        for iid in ("demo__a-1", "demo__b-2"):
            fh.write(json.dumps(v1_text_trajectory(iid)) + "\n")
    rc, _, err = _replay(capsys, str(path), "--budget", "1200")
    assert rc == 2 and "--instance" in err and "2 trajectories" in err
    rc, out, _ = _replay(capsys, str(path), "--budget", "1200", "--instance", "demo__b-2", "--json")
    assert rc == 0
    data = json.loads(out)
    assert data["instance_id"] == "demo__b-2" and len(data["steps"]) == 7
    last = data["steps"][-1]
    assert not last["passthrough"] and "demo__b-2" in last["sent"][1]["content"]
    rc, _, err = _replay(capsys, str(path), "--index", "5")
    assert rc == 2 and "out of range" in err


@pytest.mark.parametrize(("content", "args", "message"), [
    (None, [], "no such file"),
    ('{"hello": 1}', [], "holds no trajectory"),
    ("{not json", [], "not JSON"),
    (json.dumps(v1_text_trajectory("x", 2)), ["--step", "9"], "out of range"),
    (json.dumps(v1_text_trajectory("x", 2)), ["--budget", "0"], "positive"),
])
def test_bad_input_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | None,
                                    args: list[str], message: str) -> None:
    path = tmp_path / "t.json"
    if content is not None:
        path.write_text(content)
    rc, out, err = _replay(capsys, str(path), *args)
    assert rc == 2 and message in err and out == ""


@pytest.mark.skipif(not SHARED.exists(), reason="shared trajectory data not available")
def test_a_real_gemini_trajectory(capsys: pytest.CaptureFixture[str]) -> None:
    with gzip.open(SHARED, "rt") as fh:
        sizes = [len(json.loads(line)["messages"]) for line in fh]
    index = sizes.index(min(sizes))
    rc, out, err = _replay(capsys, str(SHARED), "--index", str(index), "--budget", "4000", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert data["trajectory_format"] == "mini-swe-agent-1"
    steps = data["steps"]
    with gzip.open(SHARED, "rt") as fh:
        messages = json.loads(fh.readlines()[index])["messages"]
    assert len(steps) == sum(m["role"] == "assistant" for m in messages)
    assert any(not s["passthrough"] for s in steps)
    for step in steps:
        assert step["tokens"] <= 3800
        assert_valid_structure(step["sent"], messages[:step["message_index"]])
