"""Loaders for LongMemEval, LoCoMo and mini-swe-agent trajectories (upstream formats).

Each loader reads by path (the data is never copied into the repository) and yields the
records of :mod:`flexamem_eval.items`. Malformed input raises :class:`DatasetError` with the
file and the entry that is wrong, never a bare ``KeyError`` from deep inside.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from flexamem_core import Message, MessageError

from .items import ConversationItem, Item, Question, TrajectoryItem, turn_message

DATASETS = ("longmemeval", "locomo", "trajectories")

#: LoCoMo question categories (README of the data folder).
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

#: Every ``D<session>:<turn>`` inside an evidence string; tolerates ``D:11:26`` and ``D30:05``.
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")


class DatasetError(ValueError):
    """Raised for a file that is missing or not in the expected upstream format."""


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8")


def read_records(path: str | Path) -> list[Any]:
    """Read a ``.json`` (list or object), ``.jsonl`` or either gzipped."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such file")
    name = path.name.removesuffix(".gz")
    try:
        with _open_text(path) as f:
            if name.endswith(".jsonl"):
                return [json.loads(line) for line in f if line.strip()]
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        raise DatasetError(f"{path}: not valid JSON: {exc}") from None
    return data if isinstance(data, list) else [data]


def _require(record: Mapping[str, Any], keys: tuple[str, ...], where: str) -> None:
    if not isinstance(record, Mapping):
        raise DatasetError(f"{where}: expected an object, got {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise DatasetError(f"{where}: missing field(s) {missing}")


# --------------------------------------------------------------------------- LongMemEval

def longmemeval_item(record: Mapping[str, Any], where: str = "record") -> ConversationItem:
    """One LongMemEval question with its own haystack; evidence turns are ``has_answer``."""
    _require(record, ("question_id", "question", "haystack_sessions"), where)
    qid = str(record["question_id"])
    sessions = record["haystack_sessions"]
    session_ids = record.get("haystack_session_ids") or [f"s{i}" for i in range(len(sessions))]
    dates = record.get("haystack_dates") or [None] * len(sessions)
    if not (len(sessions) == len(session_ids) == len(dates)):
        raise DatasetError(f"{where} ({qid}): haystack sessions, ids and dates differ in length")
    history: list[Message] = []
    evidence: list[str] = []
    texts: dict[str, str] = {}
    for s_index, (sid, date, turns) in enumerate(zip(session_ids, dates, sessions, strict=True)):
        for t_index, turn in enumerate(turns):
            if not isinstance(turn, Mapping) or "content" not in turn:
                raise DatasetError(f"{where} ({qid}): session {sid} turn {t_index} has no content")
            role = turn.get("role", "user")
            if role not in ("user", "assistant"):
                raise DatasetError(f"{where} ({qid}): unknown role {role!r}")
            turn_id = f"{s_index}:{t_index}"
            text = str(turn["content"])
            history.append(turn_message(text, role, turn_id, str(sid), date))
            texts[turn_id] = text
            if turn.get("has_answer"):
                evidence.append(turn_id)
    question = Question(item_id=qid, text=str(record["question"]),
                        group=str(record.get("question_type", "unknown")),
                        evidence=tuple(evidence), abstention=qid.endswith("_abs"),
                        answer=str(record.get("answer", "")), date=record.get("question_date"))
    return ConversationItem(history_id=qid, history=tuple(history), questions=(question,), turn_text=texts)


def load_longmemeval(path: str | Path) -> Iterator[ConversationItem]:
    for i, record in enumerate(read_records(path)):
        yield longmemeval_item(record, where=f"{path}: entry {i}")


# --------------------------------------------------------------------------------- LoCoMo

def parse_evidence(values: Any) -> tuple[str, ...]:
    """Every ``D<int>:<int>`` of LoCoMo evidence strings, normalised (``D30:05`` -> ``D30:5``)."""
    if isinstance(values, str):
        values = [values]
    out: list[str] = []
    for value in values or ():
        for s, t in _DIA_ID.findall(str(value)):
            dia = f"D{int(s)}:{int(t)}"
            if dia not in out:
                out.append(dia)
    return tuple(out)


def _normal_dia(dia: str) -> str:
    found = _DIA_ID.findall(dia)
    return f"D{int(found[0][0])}:{int(found[0][1])}" if found else dia


def locomo_item(record: Mapping[str, Any], where: str = "record") -> ConversationItem:
    """One LoCoMo conversation; ``speaker_a`` speaks as user, ``speaker_b`` as assistant."""
    _require(record, ("sample_id", "conversation", "qa"), where)
    sample = str(record["sample_id"])
    conv = record["conversation"]
    _require(conv, ("speaker_a", "speaker_b"), f"{where} ({sample}) conversation")
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    history: list[Message] = []
    texts: dict[str, str] = {}
    for n in numbers:
        date = conv.get(f"session_{n}_date_time")
        for k, turn in enumerate(conv[f"session_{n}"]):
            if not isinstance(turn, Mapping) or "text" not in turn or "speaker" not in turn:
                raise DatasetError(f"{where} ({sample}): session_{n} turn {k} lacks speaker or text")
            speaker = str(turn["speaker"])
            text = f"{speaker}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            dia = _normal_dia(str(turn.get("dia_id") or f"D{n}:{k + 1}"))
            role = "user" if speaker == conv["speaker_a"] else "assistant"
            history.append(turn_message(text, role, dia, f"session_{n}", date))
            texts[dia] = text
    questions = []
    for i, qa in enumerate(record["qa"]):
        _require(qa, ("question",), f"{where} ({sample}) qa {i}")
        category = qa.get("category")
        questions.append(Question(
            item_id=f"{sample}:{i}", text=str(qa["question"]),
            group=LOCOMO_CATEGORIES.get(category, str(category)),
            evidence=tuple(e for e in parse_evidence(qa.get("evidence")) if e in texts),
            abstention=False, answer=str(qa.get("answer", qa.get("adversarial_answer", ""))),
        ))
    return ConversationItem(history_id=sample, history=tuple(history), questions=tuple(questions),
                            turn_text=texts)


def load_locomo(path: str | Path) -> Iterator[ConversationItem]:
    for i, record in enumerate(read_records(path)):
        yield locomo_item(record, where=f"{path}: conversation {i}")


# --------------------------------------------------------------------------- trajectories

def trajectory_item(record: Mapping[str, Any], item_id: str, where: str = "record") -> TrajectoryItem:
    """A mini-swe-agent ``.traj.json`` object (``messages`` in OpenAI style)."""
    _require(record, ("messages",), where)
    messages = []
    for i, m in enumerate(record["messages"]):
        try:
            msg = Message.from_dict(m)
        except MessageError as exc:
            raise DatasetError(f"{where} ({item_id}): message {i}: {exc}") from None
        messages.append(Message(role=msg.role, content=msg.content, tool_calls=msg.tool_calls,
                                tool_call_id=msg.tool_call_id, id=f"{item_id}:{i}", name=msg.name))
    if not any(m.role == "user" for m in messages):
        raise DatasetError(f"{where} ({item_id}): no task (user message)")
    return TrajectoryItem(item_id=item_id, messages=tuple(messages))


def _traj_id(record: Mapping[str, Any], fallback: str) -> str:
    info = record.get("info") if isinstance(record.get("info"), Mapping) else {}
    return str(record.get("instance_id") or info.get("instance_id") or fallback)


def load_trajectories(path: str | Path) -> Iterator[TrajectoryItem]:
    """A ``.traj.json`` file, a folder of them (recursively), or a ``.jsonl(.gz)`` of them."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("*.traj.json"))
        if not files:
            raise DatasetError(f"{path}: folder holds no .traj.json files")
        for f in files:
            for record in read_records(f):
                yield trajectory_item(record, _traj_id(record, f.name.removesuffix(".traj.json")), str(f))
        return
    stem = path.name.removesuffix(".gz").removesuffix(".jsonl").removesuffix(".json").removesuffix(".traj")
    records = read_records(path)
    for i, record in enumerate(records):
        fallback = stem if len(records) == 1 else f"{stem}:{i}"
        yield trajectory_item(record, _traj_id(record, fallback), f"{path}: entry {i}")


LOADERS = {"longmemeval": load_longmemeval, "locomo": load_locomo, "trajectories": load_trajectories}

#: The small samples that ship with the package (invented for FlexA-Mem, in the upstream formats;
#: see ``samples/README.md``): what ``flexamem eval DATASET`` runs on without ``--data``.
SAMPLES = {"longmemeval": "longmemeval_sample.jsonl", "locomo": "locomo_sample.json",
           "trajectories": "trajectories"}


def sample_path(dataset: str) -> Path:
    """The bundled sample of ``dataset``: a file, or for trajectories a folder of ``.traj.json``."""
    if dataset not in SAMPLES:
        raise DatasetError(f"unknown dataset {dataset!r}; expected one of {list(DATASETS)}")
    return Path(__file__).resolve().with_name("samples") / SAMPLES[dataset]


def load(dataset: str, path: str | Path, limit: int | None = None) -> list[Item]:
    """Load a dataset file; ``limit`` caps the questions (conversations) or trajectories.

    LongMemEval has one question per history, so its first ``limit`` questions are taken.
    LoCoMo asks many questions of each conversation: the first ``ceil(limit / n)`` questions
    of each of its ``n`` conversations are kept, so that every history is measured.
    """
    if dataset not in LOADERS:
        raise DatasetError(f"unknown dataset {dataset!r}; expected one of {list(DATASETS)}")
    if limit is not None and limit < 1:
        raise DatasetError(f"limit must be at least 1, got {limit}")
    if dataset == "locomo":
        items = list(LOADERS[dataset](path))
        if limit is None or not items:
            return list(items)
        per = -(-limit // len(items))
        return [replace(it, questions=it.questions[:per]) for it in items if it.questions[:per]]
    out: list[Item] = []
    for item in LOADERS[dataset](path):
        if limit is not None and len(out) >= limit:
            break
        out.append(item)
    return out
