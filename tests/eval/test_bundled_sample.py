"""``flexamem eval SOURCE`` without ``--data`` runs on the small sample bundled with the package.

The samples (``flexamem_eval/samples/``) are invented histories in the upstream formats, long
enough that a 2,000-token budget cannot hold them, so the figures mean something: FlexA-Mem
shows more evidence than keeping the newest messages, and the trajectory has details that a
later command reuses. Each end-to-end run loads the real embedder and takes seconds to tens of
seconds on a CPU; the format checks need no model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flexamem_core.request.tokens import default_tokenizer
from flexamem_eval.actions import trajectory_targets
from flexamem_eval.datasets import SAMPLES, load, read_records, sample_path
from flexamem_eval.items import ConversationItem, TrajectoryItem
from flexamem_tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
BUDGET = 2000
METHODS = ("flexamem-auto", "truncation")
#: Questions (LongMemEval: one history each; LoCoMo: of its one conversation) or trajectories.
LIMITS = {"longmemeval": 2, "locomo": 21, "trajectories": 1}
SHARES = ("evidence_turns_full", "evidence_turns_part", "questions_all_evidence", "reused_detail_recall",
          "command_trace_recall", "task_kept", "cached_prefix_share")


def _eval(source: str, tmp_path: Path, capsys) -> dict[tuple[str, str], dict]:
    out = tmp_path / source
    code = main(["eval", source, "--budgets", str(BUDGET), "--methods", *METHODS,
                 "--limit", str(LIMITS[source]), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    said = [line for line in err.splitlines() if "bundled" in line]
    assert len(said) == 1 and f"{source} sample" in said[0] and "--data" in said[0], err
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {r["dataset"] for r in rows} == {source} and {r["budget"] for r in rows} == {BUDGET}
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["data"] == str(sample_path(source))
    table = {(r["method"], r["metric"]): r for r in rows}
    for method in METHODS:
        assert (method, "context_tokens_max") in table, f"no rows for {method}"
        assert 0 < table[method, "context_tokens_max"]["value"] <= 0.95 * BUDGET
        for (m, metric), row in table.items():
            if m == method and metric.split("[")[0] in SHARES:
                assert 0.0 <= row["value"] <= 1.0, (m, metric, row)
    return table


@pytest.mark.parametrize("source", ["longmemeval", "locomo"])
def test_conversation_sample_runs_without_data(source, tmp_path, capsys):
    table = _eval(source, tmp_path, capsys)
    ours, newest = table["flexamem-auto", "evidence_turns_full"], table["truncation", "evidence_turns_full"]
    assert ours["n"] == newest["n"] > 0
    assert ours["value"] > newest["value"], (ours, newest)
    assert table["flexamem-auto", "evidence_turns_part"]["value"] > table["truncation", "evidence_turns_part"]["value"]


def test_trajectory_sample_runs_without_data(tmp_path, capsys):
    table = _eval("trajectories", tmp_path, capsys)
    for method in METHODS:
        reused = table[method, "reused_detail_recall"]
        assert reused["n"] > 0 and table[method, "calls"]["value"] > 0
    assert table["flexamem-auto", "task_kept"]["value"] == 1.0


def test_data_still_wins_over_the_sample(tmp_path, capsys):
    """With ``--data`` the given file is read and nothing is said about the sample."""
    data = tmp_path / "one.json"
    sessions = [[{"role": "user", "content": f"Day {d}: nothing much happened."},
                 {"role": "assistant", "content": "Noted."}] for d in range(5)]
    data.write_text(json.dumps([{"question_id": "q1", "question": "What happened?", "haystack_sessions": sessions}]))
    out = tmp_path / "out"
    assert main(["eval", "longmemeval", "--data", str(data), "--budgets", "500", "--methods", "full",
                 "--out", str(out), "--quiet", "--no-embedding-cache"]) == 0
    assert "bundled" not in capsys.readouterr().err
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["data"] == str(data)


# ------------------------------------------------------------- the samples themselves (no model)

def test_longmemeval_sample_has_every_kind_of_question():
    records = read_records(sample_path("longmemeval"))
    tokenizer = default_tokenizer()
    kinds = {r["question_type"] for r in records}
    assert {"single-session-user", "multi-session", "knowledge-update", "temporal-reasoning"} <= kinds
    assert sum(r["question_id"].endswith("_abs") for r in records) == 1 and 5 <= len(records) <= 8
    for r in records:
        sessions = r["haystack_sessions"]
        assert 10 <= len(sessions) <= 20
        assert len(sessions) == len(r["haystack_dates"]) == len(r["haystack_session_ids"])
        assert r["question_date"] > max(r["haystack_dates"])
        assert set(r["answer_session_ids"]) <= set(r["haystack_session_ids"])
        evidence = [i for i, s in enumerate(sessions) if any(t.get("has_answer") for t in s)]
        assert [r["haystack_session_ids"][i] for i in evidence] == r["answer_session_ids"]
        assert max(evidence) < len(sessions) - 4  # the newest sessions alone do not answer it
        tokens = sum(tokenizer.count(t["content"]) for s in sessions for t in s)
        assert tokens > 6 * BUDGET, (r["question_id"], tokens)
    items = load("longmemeval", sample_path("longmemeval"))
    assert all(isinstance(it, ConversationItem) for it in items)
    assert all(q.evidence for it in items for q in it.questions)


def test_locomo_sample_evidence_points_at_its_turns():
    (record,) = read_records(sample_path("locomo"))
    assert {q["category"] for q in record["qa"]} == {1, 2, 3, 4, 5}
    (item,) = load("locomo", sample_path("locomo"))
    assert len(item.questions) == len(record["qa"])
    for q, raw in zip(item.questions, record["qa"]):
        assert q.evidence and len(q.evidence) == len(raw["evidence"]), raw  # every id names a turn
    tokenizer = default_tokenizer()
    assert sum(tokenizer.count(m.text) for m in item.history) > 2 * BUDGET


def test_trajectory_sample_is_a_mini_swe_agent_run_with_reused_details():
    files = sorted(sample_path("trajectories").glob("*.traj.json"))
    assert files
    for path in files:
        (record,) = read_records(path)
        assert record["trajectory_format"] == "mini-swe-agent-1" and record["info"]["exit_status"] == "Submitted"
        roles = [m["role"] for m in record["messages"]]
        assert roles[:3] == ["system", "user", "assistant"] and roles[2::2] == ["assistant"] * len(roles[2::2])
        steps = roles.count("assistant")
        assert 25 <= steps <= 40
        for m in record["messages"][2:]:
            if m["role"] == "assistant":
                assert m["content"].startswith("THOUGHT: ") and m["content"].count("```bash") == 1
    for item in load("trajectories", sample_path("trajectories")):
        assert isinstance(item, TrajectoryItem)
        targets = trajectory_targets(item.messages)
        assert sum(len(t.reused) for t in targets) >= 10


def test_samples_ship_in_the_wheel_and_stay_small():
    """Every sample file matches a ``package-data`` pattern of flexamem_eval; together under 1 MB."""
    tomllib = pytest.importorskip("tomllib")
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]
    package = ROOT / "flexamem_eval"
    shipped = {p for pattern in [*package_data.get("flexamem_eval", []), *package_data.get("*", [])]
               for p in package.glob(pattern)}
    files = []
    for dataset in SAMPLES:
        path = sample_path(dataset)
        files += [path] if path.is_file() else sorted(path.glob("*.traj.json"))
    assert len(files) >= 3
    for path in files:
        assert path in shipped, f"{path.relative_to(ROOT)} is not package data of flexamem_eval"
    assert sum(p.stat().st_size for p in files) < 1_000_000


def test_with_no_options_it_writes_next_to_the_user(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "locomo", "--methods", "truncation", "--limit", "5"]) == 0
    results = json.loads((tmp_path / "flexamem-eval-locomo" / "results.json").read_text())
    assert {r["method"] for r in results} == {"truncation"} and {r["budget"] for r in results} == {2000, 4000}
    err = capsys.readouterr().err
    assert "bundled" in err
    assert "\r" not in err and "question/s" not in err  # no progress bar where stderr is not a terminal
