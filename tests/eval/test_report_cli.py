"""Aggregation, the Markdown report, plots, the dump and the command line end to end."""

from __future__ import annotations

import json

import pytest

from flexamem_eval.report import aggregate, markdown, write_outputs
from flexamem_eval.runner import ItemResult, RenderRecord, WriteRecord
from flexamem_tools.cli import main

from .test_datasets import LME, TRAJ


def _results() -> list[ItemResult]:
    a = ItemResult(questions=2, abstentions=1)
    a.renders = [
        RenderRecord("m", 4000, "q1", "temporal", 100, 1.0, evidence_full=1, evidence_part=2, evidence_turns=2,
                     all_evidence=True),
        RenderRecord("m", 4000, "q2", "multi", 300, 3.0, evidence_full=0, evidence_part=0, evidence_turns=1,
                     all_evidence=False),
        RenderRecord("m", 4000, "q3_abs", "multi", 200, 2.0),
    ]
    a.writes = [WriteRecord("m", "h", 50.0, 10, 0)]
    return [a]


def test_aggregate_known_values():
    rows = {(r["metric"]): r for r in aggregate("longmemeval", _results())}
    assert rows["evidence_turns_full"]["value"] == pytest.approx(1 / 3) and rows["evidence_turns_full"]["n"] == 3
    assert rows["evidence_turns_part"]["value"] == pytest.approx(2 / 3)
    assert rows["questions_all_evidence"]["value"] == 0.5 and rows["questions_all_evidence"]["n"] == 2
    assert rows["context_tokens_mean"]["value"] == 200 and rows["context_tokens_max"]["value"] == 300
    assert rows["render_ms_p50"]["value"] == 2.0
    assert rows["write_ms_per_unit"]["value"] == 5.0 and rows["llm_calls_per_unit"]["value"] == 0.0
    assert rows["evidence_turns_full[temporal]"]["value"] == 0.5
    assert rows["questions_all_evidence[multi]"]["value"] == 0.0 and rows["questions_all_evidence[multi]"]["n"] == 1
    assert rows["abstention_questions"]["value"] == 1
    # whole questions resampled: both of q1 (1 of 2 turns) at best, both of q2 (0 of 1) at worst
    assert rows["evidence_turns_full_ci_low"]["value"] == 0.0 and rows["evidence_turns_full_ci_high"]["value"] == 0.5
    assert rows["evidence_turns_full_ci_low"]["n"] == 2
    assert set(next(iter(rows.values()))) == {"dataset", "method", "budget", "metric", "value", "n"}



def test_trajectory_spread_counts_each_step_once_and_brackets_the_share():
    """One heavy step (40 strings, 10 shown) and twelve light ones (1 string, shown): the share
    over strings is pulled down by the heavy step, the mean over steps is not, and the
    bootstrap interval over trajectories contains the share and is reproducible."""
    res = ItemResult()
    res.renders = [RenderRecord("m", 4000, "heavy", "all", 100, 1.0, step=0, reused_hits=10, reused_total=40)]
    res.renders += [RenderRecord("m", 4000, f"t{i}", "all", 100, 1.0, step=1, reused_hits=1, reused_total=1)
                    for i in range(12)]
    res.renders.append(RenderRecord("m", 4000, "t0", "all", 100, 1.0, step=2))  # no reused string: not a step
    rows = {r["metric"]: r for r in aggregate("trajectories", [res])}
    assert rows["reused_detail_recall"]["value"] == pytest.approx(22 / 52)
    assert rows["reused_detail_recall_per_step"]["value"] == pytest.approx((0.25 + 12) / 13)
    assert rows["reused_detail_recall_per_step"]["n"] == 13 and rows["reused_detail_recall_ci_low"]["n"] == 13
    low, high = rows["reused_detail_recall_ci_low"]["value"], rows["reused_detail_recall_ci_high"]["value"]
    assert low < 22 / 52 < high <= 1.0
    again = {r["metric"]: r for r in aggregate("trajectories", [res])}
    bounds = again["reused_detail_recall_ci_low"]["value"], again["reused_detail_recall_ci_high"]["value"]
    assert bounds == (low, high)
    assert "reused_detail_recall_per_step" in markdown(list(rows.values()))

def test_reused_details_are_split_into_near_and_far():
    res = ItemResult()
    res.renders = [RenderRecord("m", 4000, "a", "all", 100, 1.0, step=0, reused_hits=3, reused_total=4,
                                far_hits=1, far_total=2),
                   RenderRecord("m", 4000, "b", "all", 100, 1.0, step=1, reused_hits=1, reused_total=4,
                                far_hits=0, far_total=3)]
    rows = {r["metric"]: r for r in aggregate("trajectories", [res])}
    assert rows["reused_detail_recall"]["value"] == pytest.approx(4 / 8)
    far, near = rows["reused_detail_recall_far"], rows["reused_detail_recall_near"]
    assert far["value"] == pytest.approx(1 / 5) and far["n"] == 5
    assert near["value"] == pytest.approx(3 / 3) and near["n"] == 3
    assert "reused_detail_recall_far" in markdown(list(rows.values()))


def test_markdown_and_plots(tmp_path):
    rows = aggregate("longmemeval", _results())
    text = markdown(rows)
    assert "## longmemeval, budget 4,000" in text and "| m | 33.3 | 66.7 | 50.0 |" in text
    assert "by question type" in text
    paths = write_outputs(tmp_path, rows)
    assert (tmp_path / "results.json").exists() and (tmp_path / "longmemeval_evidence_turns_full.png") in paths
    assert json.loads((tmp_path / "results.json").read_text()) == rows


def test_cli_end_to_end_trajectories(tmp_path, capsys):
    filler = "\n".join(f"line {k} of a long listing" for k in range(60))
    msgs = TRAJ["messages"][:2]
    for i in range(10):  # step i prints pkg/mod_i.py; step i reads the file printed 4 steps earlier
        output = f"<returncode>0</returncode>\n<output>\npkg/mod_{i}.py\n{filler}\n</output>"
        msgs = [*msgs, {"role": "assistant", "content": f"THOUGHT: t\n\n```bash\ncat pkg/mod_{i - 4}.py\n```"},
                {"role": "user", "content": output}]
    data = tmp_path / "t.jsonl"
    data.write_text(json.dumps({**TRAJ, "messages": msgs, "instance_id": "a__b-1"}))
    out = tmp_path / "out"
    code = main(["eval", "trajectories", "--data", str(data), "--budgets", "1000", "2000",
                 "--methods", "full", "truncation", "masking", "--out", str(out), "--dump", "--quiet"])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())
    recall = {(r["method"], r["budget"]): r["value"] for r in rows if r["metric"] == "reused_detail_recall"}
    assert recall[("full", 1000)] == 1.0
    assert recall[("truncation", 1000)] < 1.0
    dumps = [json.loads(line) for line in (out / "renders.jsonl").read_text().splitlines()]
    assert {d["item_id"] for d in dumps} == {"a__b-1"}
    assert set(dumps[0]) == {"dataset", "item_id", "method", "budget", "step", "context_text", "context_tokens"}
    assert (out / "results.md").read_text().count("## trajectories, budget") == 2
    assert (out / "trajectories_reused_detail_recall.png").exists()
    cache = {(r["method"], r["budget"], r["metric"]): r for r in rows
             if r["metric"] in ("cached_prefix_share", "cost_per_call", "calls")}
    assert len(cache) == 3 * 2 * 3
    for (method, budget, metric), r in cache.items():
        steps = next(x for x in rows if (x["method"], x["budget"], x["metric"]) == (method, budget, "steps"))
        assert cache[(method, budget, "calls")]["value"] == steps["value"] > 0
        if metric == "cost_per_call":
            assert r["price_model"]["cached_token"] == 0.1 and r["value"] > 0
    assert cache[("full", 1000, "cached_prefix_share")]["value"] > cache[("truncation", 1000, "cached_prefix_share")][
        "value"]
    assert (out / "trajectories_prompt_cache.png").exists()


def test_cli_longmemeval_and_bad_options(tmp_path, capsys):
    data = tmp_path / "lme.json"
    data.write_text(json.dumps([LME]))
    out = tmp_path / "o"
    assert main(["eval", "longmemeval", "--data", str(data), "--budgets", "30", "--methods", "full", "truncation",
                 "--out", str(out), "--quiet"]) == 0
    rows = json.loads((out / "results.json").read_text())
    full = {r["metric"]: r["value"] for r in rows if r["method"] == "full"}
    assert full["evidence_turns_full"] == 1.0
    assert main(["eval", "longmemeval", "--data", str(data), "--methods", "nope", "--out", str(out)]) == 2
    assert "unknown method" in capsys.readouterr().err
    assert main(["eval", "longmemeval", "--data", str(tmp_path / "x.json"), "--out", str(out)]) == 2
    assert main(["eval", "longmemeval", "--data", str(data), "--budgets", "0", "--out", str(out)]) == 2


def test_workers_give_the_same_measures(tmp_path):
    from flexamem_eval import evaluate

    data = tmp_path / "lme.jsonl"
    data.write_text("\n".join(json.dumps({**LME, "question_id": f"q{i}"}) for i in range(3)))
    timing = ("render_ms_p50", "render_ms_p95", "write_ms_per_unit")

    def measures(workers: int) -> list:
        rows = evaluate("longmemeval", data, [30, 60], ["full", "truncation", "masking-log"], workers=workers)
        return [r for r in rows if r["metric"] not in timing]

    assert measures(2) == measures(1)
