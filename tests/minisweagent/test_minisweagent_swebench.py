"""``mini-extra swebench --model-class flexamem_minisweagent.FlexAMemModel``, offline.

The real batch runner in a subprocess, on a two-instance local dataset (a directory with
``test.jsonl``, which ``datasets.load_dataset`` reads without the network), with the local
environment instead of docker and mini-swe-agent's tool-calling deterministic model as
the inner model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mswea_fakes as fakes
import pytest
import yaml
from flexamem_minisweagent import is_memory_dict
from mswea_checks import assert_valid_structure, assert_window_is_tail, memory_index

HERE = Path(__file__).resolve().parent
BUDGET = 4000  # swebench.yaml's prompt alone is about 1,500 tokens
INSTANCES = [
    {"instance_id": "demo__widgets-1", "repo": "demo/widgets", "base_commit": "0" * 40,
     "problem_statement": "Widgets crash when MAGIC_TOKEN is unset. Find the token and report it."},
    {"instance_id": "demo__gadgets-2", "repo": "demo/gadgets", "base_commit": "1" * 40,
     "problem_statement": "Gadgets print the wrong region. Find MAGIC_TOKEN and REGION and report them."},
]


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("swebench")
    dataset = root / "dataset"
    dataset.mkdir()
    (dataset / "test.jsonl").write_text("".join(json.dumps(i) + "\n" for i in INSTANCES))
    work = root / "work"
    work.mkdir()
    config = root / "flexamem_swebench.yaml"
    config.write_text(yaml.safe_dump({
        "agent": {"cost_limit": 0, "step_limit": 30},
        "environment": {"cwd": str(work), "timeout": 60},
        "model": {"inner_model_class": "mswea_fakes.RecordingDeterministicToolcallModel",
                  "model_name": "fake-toolcall", "record_path": str(root / "received.jsonl"),
                  "outputs": fakes.toolcall_outputs(parallel=2), "flexamem": {"budget": BUDGET}},
    }))
    out = root / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
           "MSWEA_SILENT_STARTUP": "1", "MSWEA_GLOBAL_CONFIG_DIR": str(root / "mswea_config"),
           "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(root / "hf_cache"),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [sys.executable, "-m", "minisweagent.run.utilities.mini_extra", "swebench",
           "--subset", str(dataset), "--split", "test", "-o", str(out), "-w", "1",
           "-c", "swebench.yaml", "-c", str(config),
           "--model-class", "flexamem_minisweagent.FlexAMemModel", "--environment-class", "local"]
    proc = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=600)
    received = [json.loads(line) for line in (root / "received.jsonl").read_text().splitlines()] \
        if (root / "received.jsonl").exists() else []
    return {"proc": proc, "out": out, "received": received}


def test_the_batch_run_completes_every_instance(batch: dict) -> None:
    proc = batch["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    preds = json.loads((batch["out"] / "preds.json").read_text())
    assert sorted(preds) == sorted(i["instance_id"] for i in INSTANCES)
    for instance in INSTANCES:
        pred = preds[instance["instance_id"]]
        assert pred["model_name_or_path"] == "fake-toolcall"
        assert fakes.SECRET in pred["model_patch"]


def test_saved_trajectories_are_complete_and_carry_the_reports(batch: dict) -> None:
    namespaces = set()
    for instance in INSTANCES:
        iid = instance["instance_id"]
        traj = json.loads((batch["out"] / iid / f"{iid}.traj.json").read_text())
        assert traj["info"]["exit_status"] == "Submitted"
        messages = traj["messages"]
        assert instance["problem_statement"] in messages[1]["content"]
        assert not any(is_memory_dict(m) for m in messages)
        calls = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        results = [m for m in messages if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in results] == calls[:-1]
        assert "checksum 260" in results[-1]["content"]  # outputs saved in full
        infos = [m["extra"]["flexamem"] for m in messages if m["role"] == "assistant"]
        assert len(infos) == traj["info"]["model_stats"]["api_calls"]
        assert any(not i["passthrough"] for i in infos)
        assert all(i["budget"] == BUDGET and i["tokens"] <= BUDGET * 0.95 for i in infos)
        namespaces |= {i["namespace"] for i in infos}
    assert len(namespaces) == len(INSTANCES)  # instances never share a memory


def test_the_model_received_rendered_memories(batch: dict) -> None:
    received = batch["received"]
    assert len(received) == len(fakes.toolcall_outputs(parallel=2)) * len(INSTANCES)
    trajectories = {}
    for instance in INSTANCES:
        iid = instance["instance_id"]
        traj = json.loads((batch["out"] / iid / f"{iid}.traj.json").read_text())
        infos = [m["extra"]["flexamem"] for m in traj["messages"] if m["role"] == "assistant"]
        trajectories[traj["messages"][1]["content"]] = (traj["messages"], iter(infos))
    with_memory = 0
    for sent in received:
        messages, infos = trajectories[sent[1]["content"]]  # the instance this call belongs to
        history = messages[:next(infos)["messages_in"]]
        assert_valid_structure(sent, history)
        if any(is_memory_dict(m) for m in sent):
            with_memory += 1
            assert len(sent) < len(history)
            assert_window_is_tail(sent[memory_index(sent) + 1:], history)
    assert with_memory >= 2 * len(INSTANCES)
