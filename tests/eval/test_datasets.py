"""Loaders on small hand-built files in each upstream format, and their error messages."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from flexamem_eval.datasets import DatasetError, load, parse_evidence

LME = {
    "question_id": "q1", "question_type": "single-session-user", "question": "What is my dog called?",
    "answer": "Biscuit", "question_date": "2023/06/01 (Thu) 10:00",
    "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 09:00"],
    "haystack_session_ids": ["s_a", "s_b"],
    "haystack_sessions": [
        [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"}],
        [{"role": "user", "content": "My dog is called Biscuit.", "has_answer": True},
         {"role": "assistant", "content": "Nice name."}],
    ],
    "answer_session_ids": ["s_b"],
}

LOCOMO = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I paint sunsets."},
                      {"speaker": "Ben", "dia_id": "D1:2", "text": "Cool!", "blip_caption": "a photo of a cat"}],
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "I went hiking."}],
    },
    "qa": [
        {"question": "What does Ann paint?", "answer": "sunsets", "evidence": ["D1:1"], "category": 4},
        {"question": "Both?", "answer": "x", "evidence": ["D1:2; D2:1"], "category": 1},
        {"question": "Adversarial?", "adversarial_answer": "no", "evidence": ["D:2:01"], "category": 5},
    ],
}

TRAJ = {
    "trajectory_format": "mini-swe-agent-1", "info": {"exit_status": "Submitted"},
    "messages": [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix it."},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls\n```", "extra": {}},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
    ],
}


def _write(path: Path, records: list, jsonl: bool) -> Path:
    text = "\n".join(json.dumps(r) for r in records) if jsonl else json.dumps(records)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name,jsonl", [("a.json", False), ("a.jsonl", True), ("a.jsonl.gz", True)])
def test_longmemeval_formats(tmp_path, name, jsonl):
    items = load("longmemeval", _write(tmp_path / name, [LME, {**LME, "question_id": "q2_abs"}], jsonl))
    assert len(items) == 2
    item = items[0]
    assert [m.role for m in item.history] == ["user", "assistant", "user", "assistant"]
    q = item.questions[0]
    assert q.evidence == ("1:0",) and item.turn_text["1:0"] == "My dog is called Biscuit."
    evidence_msg = item.history[2]
    assert evidence_msg.metadata == {"session": "s_b", "turn": "1:0", "date": "2023/05/02 (Tue) 09:00"}
    assert not q.abstention and items[1].questions[0].abstention
    assert load("longmemeval", tmp_path / name, limit=1)[0].questions[0].item_id == "q1"


def test_locomo_format_and_malformed_evidence(tmp_path):
    (item,) = load("locomo", _write(tmp_path / "locomo.json", [LOCOMO], False))
    assert [m.metadata["turn"] for m in item.history] == ["D1:1", "D1:2", "D2:1"]
    assert item.history[0].content == "Ann: I paint sunsets." and item.history[0].role == "user"
    assert item.history[1].role == "assistant" and "[shares a photo of a cat]" in item.history[1].text
    assert item.history[2].metadata["session"] == "session_2"
    qs = item.questions
    assert [q.item_id for q in qs] == ["conv-x:0", "conv-x:1", "conv-x:2"]
    assert qs[1].evidence == ("D1:2", "D2:1") and qs[1].group == "multi-hop"
    assert qs[2].evidence == ("D2:1",) and qs[2].answer == "no" and qs[2].group == "adversarial"


def test_locomo_limit_spreads_questions_over_conversations(tmp_path):
    second = {**LOCOMO, "sample_id": "conv-y"}
    items = load("locomo", _write(tmp_path / "l.json", [LOCOMO, second], False), limit=3)
    assert [(it.history_id, len(it.questions)) for it in items] == [("conv-x", 2), ("conv-y", 2)]
    with pytest.raises(DatasetError, match="at least 1"):
        load("locomo", tmp_path / "l.json", limit=0)


def test_parse_evidence_every_id_in_malformed_strings():
    assert parse_evidence(["D8:6; D9:17"]) == ("D8:6", "D9:17")
    assert parse_evidence(["D:11:26"]) == ("D11:26",)
    assert parse_evidence(["D30:05", "D30:5"]) == ("D30:5",)
    assert parse_evidence(["D"]) == ()


def test_trajectory_file_folder_and_jsonl(tmp_path):
    folder = tmp_path / "runs"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "repo__issue-1.traj.json").write_text(json.dumps(TRAJ))
    (single,) = load("trajectories", folder / "sub" / "repo__issue-1.traj.json")
    assert single.item_id == "repo__issue-1" and len(single.messages) == 4
    (from_folder,) = load("trajectories", folder)
    assert from_folder.item_id == "repo__issue-1"
    records = [{**TRAJ, "instance_id": "x__y-2"}, {**TRAJ, "instance_id": "x__y-3"}]
    lines = _write(tmp_path / "t.jsonl.gz", records, True)
    assert [t.item_id for t in load("trajectories", lines)] == ["x__y-2", "x__y-3"]


def test_clear_errors(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        load("longmemeval", tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DatasetError, match="not valid JSON"):
        load("locomo", bad)
    broken = _write(tmp_path / "b.json", [{"question_id": "q"}], False)
    with pytest.raises(DatasetError, match="missing field"):
        load("longmemeval", broken)
    with pytest.raises(DatasetError, match="unknown dataset"):
        load("nope", broken)
    role = _write(tmp_path / "r.json", [{**TRAJ, "messages": [{"role": "robot", "content": "x"}]}], False)
    with pytest.raises(DatasetError, match="unknown role"):
        load("trajectories", role)
    with pytest.raises(DatasetError, match=r"no \.traj\.json"):
        load("trajectories", tmp_path)
