"""``flexamem bench --first-call``: one history handed once to each adapter as its host holds it,
with the real embedder; every unit is written on that call (a long catch-up's note vectors
just after it, in the background), and the host's log shows the catch-up (announced, ended)
while it waits."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("flexamem_minisweagent")
pytest.importorskip("flexamem_langgraph")
pytest.importorskip("flexamem_llamaindex")

from flexamem_core.index.warm import CATCH_UP_BAR_UNITS
from flexamem_eval.datasets import sample_path
from flexamem_tools.bench_first_call import first_call_rows, trajectory_history
from tests.agent_runs import text_action_run


def test_each_adapter_writes_the_whole_history_on_its_first_call_and_logs_it(tmp_path):
    runs = [text_action_run(60), text_action_run(50)]
    data = tmp_path / "runs.jsonl"
    data.write_text("\n".join(json.dumps({"instance_id": f"r{i}", "messages": m}) for i, m in enumerate(runs)))
    lines: list[str] = []
    rows = first_call_rows(str(data), [80, 200], budget=2000, paths=("minisweagent", "langchain", "llamaindex"),
                           print_fn=lines.append, conversations=str(sample_path("locomo")))
    agent_rows = [r for r in rows if r["history"] == "agent"]
    assert [(r["path"], r["messages"]) for r in agent_rows] == [
        (p, n) for p in ("minisweagent", "langchain", "llamaindex") for n in (80, 200)]
    chat_rows = [r for r in rows if r["history"] == "conversation"]
    assert [r["path"] for r in chat_rows] == ["llamaindex", "llamaindex"]
    assert 0 < chat_rows[0]["messages"] <= 80 and chat_rows[0]["messages"] <= chat_rows[1]["messages"] <= 200
    assert len(lines) == len(rows)
    by = {(r["path"], r["messages"]): r for r in agent_rows}
    for r in rows:
        assert r["seconds"] > 0 and r["texts_embedded_in_all"] > 0 and r["next_seconds"] > 0, r
        assert r["background_after_next_seconds"] >= 0, r
        assert r["last_info_line"].startswith("render "), "the render's own INFO line ends the call"
    for path in ("minisweagent", "langchain"):
        assert by[(path, 200)]["texts_embedded_in_all"] > by[(path, 80)]["texts_embedded_in_all"]
    # 200 messages of ~250-token steps are more units than a catch-up that shows its progress
    long = by[("minisweagent", 200)]
    assert long["texts_embedded_in_all"] >= CATCH_UP_BAR_UNITS
    assert long["texts_embedded"] < CATCH_UP_BAR_UNITS, "the notes' vectors are made after the call"
    assert long["info_lines"] >= 3, "announced, ended, rendered"
    for r in chat_rows:  # the chat preset's pieces are embedded after the first call, filled by the next
        assert r["texts_embedded_by_next"] > r["texts_embedded"], r


def test_the_history_joins_runs_after_the_first_runs_task_and_ends_on_an_observation():
    runs = [{"messages": text_action_run(3)}, {"messages": text_action_run(4)}]
    history = trajectory_history(runs, 11)
    assert [m["id"] for m in history[:2]] == ["sys", "task"]
    assert history[-1]["role"] == "user" and len(history) == 10
    assert sum(m["role"] == "system" for m in history) == 1
