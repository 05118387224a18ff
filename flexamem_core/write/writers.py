"""Record writers: the rule-based default (no LLM call) and an optional LLM writer.

The rule writer has to keep the trace useful, not placeholder text: for an agent step it
writes the command or tool call with its key arguments and the outcome (exit code, the
error line, the first lines printed); for a conversation span it writes who said what,
preferring sentences that carry names, dates and numbers. The LLM writer asks any chat
callable for the same record and fields as JSON, enforces the paper's word limits and
falls back to the rule writer when the output is malformed or the call fails.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..index.bm25 import terms
from ..model.messages import Message
from ..model.protocols import WrittenRecord
from ..model.schema import Unit
from .units import action_text, first_line, speaker_of, split_steps

log = logging.getLogger(__name__)

_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT = re.compile(r"(?:exit(?:ed)?(?: with)?(?: code| status)?|returncode)[:= ]+(-?\d+)", re.I)
_ERROR = re.compile(r"(error|exception|traceback|failed|failure|fatal|no such file|not found|denied|"
                    r"cannot|can't|invalid|assert)", re.I)
_TAGS = re.compile(r"</?[a-z_]+>")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_INFORMATIVE = re.compile(r"\b(?:[A-Z][a-z]+|\d[\d,.:/-]*|[A-Z]{2,})\b")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{3,}")
#: What makes an _IDENT match an identifier rather than a word: a path or name separator, a digit.
_IDENT_MARK = re.compile(r"[_./0-9]")


def words(text: str) -> list[str]:
    return text.split()


def cut_words(text: str, n: int) -> str:
    """At most ``n`` words; a mark shows where text was cut."""
    w = words(text)
    return text.strip() if len(w) <= n else " ".join(w[:n]) + " ..."


def _short(text: str, n_words: int) -> str:
    return cut_words(" ".join(text.split()), n_words)


def _key_args(arguments: str) -> str:
    """Key arguments of a tool call: short scalar values, long ones abbreviated."""
    try:
        data = json.loads(arguments) if arguments else {}
    except (ValueError, TypeError):
        return _short(arguments, 12)
    if not isinstance(data, Mapping):
        return _short(str(data), 12)
    parts = []
    for k, v in data.items():
        s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
        s = " ".join(s.split())
        parts.append(f"{k}={s if len(s) <= 60 else s[:57] + '...'}")
    return ", ".join(parts)


_STRONG_ERROR = re.compile(r"^E\s|\b\w*(Error|Exception)\b|^fatal:|No such file", re.I)
_SUMMARY = re.compile(r"\b\d+ (passed|failed|errors?)\b")


def _meaningful(line: str) -> bool:
    """At least three letters or digits (stops at the third: outputs run to thousands of lines)."""
    seen = 0
    for c in line:
        if c.isalnum():
            seen += 1
            if seen == 3:
                return True
    return False


def outcome_of(output: str) -> str:
    """Exit code, the most telling error line, a test summary and the first printed line."""
    rc_match = _RETURNCODE.search(output) or _EXIT.search(output)
    body = _TAGS.sub("", _RETURNCODE.sub("", output))
    lines = [ln.strip(" =-_*#\t") for ln in body.splitlines()]
    lines = [ln for ln in lines if _meaningful(ln)]
    bits = []
    if rc_match:
        bits.append(f"rc {rc_match.group(1)}")
    error = next((ln for ln in reversed(lines) if _STRONG_ERROR.search(ln)), None) or \
        next((ln for ln in reversed(lines) if _ERROR.search(ln)), None)
    summary = next((ln for ln in reversed(lines) if _SUMMARY.search(ln)), None)
    if error:
        bits.append(_short(error, 14))
    if summary and summary != error:
        bits.append(_short(summary, 10))
    if not error and not summary and lines:
        bits.append(_short(lines[0], 12))
    if len(lines) > 1:
        bits.append(f"({len(lines)} lines)")
    return ", ".join(bits) if bits else "no output"


def _step_record(step: Sequence[Message], n: int) -> str:
    head = step[0]
    results = [m for m in step[1:] if m.role in ("tool", "user")]
    if head.role != "assistant":
        return f"{speaker_of(head)}: {_short(head.text, 25)}"
    if head.tool_calls:
        action = "; ".join(f"{c.name}({_key_args(c.arguments)})" for c in head.tool_calls)
        verb = "called"
    else:
        action = first_line(action_text(head), 120)
        verb = "ran"
    if not action:
        return f"step {n} assistant said: {_short(head.text, 30)}"
    outcome = "; ".join(outcome_of(m.text) for m in results) if results else "no result yet"
    return f"step {n} {verb} `{action}` -> {outcome}"


def agent_record(unit: Unit, limit: int) -> str:
    steps = split_steps(unit.messages)
    n = unit.first_step
    parts = []
    for step in steps:
        parts.append(_step_record(step, n))
        if step[0].role == "assistant":
            n += 1
    per_step = max(10, limit // max(1, len(parts)))
    return cut_words("; ".join(cut_words(p, per_step) for p in parts), limit)


def _best_sentence(text: str, n_words: int) -> str:
    sentences = [s for s in _SENTENCE.split(" ".join(text.split())) if s]
    if not sentences:
        return ""
    best = max(sentences, key=lambda s: (len(_INFORMATIVE.findall(s[1:])), -sentences.index(s)))
    return cut_words(best, n_words)


def reader_record(unit: Unit, limit: int) -> str:
    """Who said what, keeping the turns with the most names, dates and numbers."""
    dates = [m.metadata.get("date") for m in unit.messages if m.metadata and m.metadata.get("date")]
    prefix = f"[{dates[0]}] " if dates else ""
    turns = []
    for i, m in enumerate(unit.messages):
        sent = _best_sentence(m.text, 14)
        if sent:
            turns.append((i, speaker_of(m), sent, len(_INFORMATIVE.findall(sent))))
    budget = limit - len(words(prefix))
    chosen: list[tuple[int, str, str, int]] = []
    used = 0
    for t in sorted(turns, key=lambda t: (-t[3], t[0])):
        cost = len(words(t[2])) + 1
        if used + cost <= budget:
            chosen.append(t)
            used += cost
    chosen.sort()
    return cut_words(prefix + " ".join(f"{s}: {txt}" for _, s, txt, _ in chosen), limit)


def keywords_of(unit: Unit, n: int = 10) -> tuple[str, ...]:
    """The most frequent content words and identifiers of the unit."""
    idents = Counter(m for m in _IDENT.findall(unit.raw) if _IDENT_MARK.search(m))
    counts = Counter(terms(unit.raw))
    out = [w for w, _ in idents.most_common(n // 2)]
    out += [w for w, _ in counts.most_common(n * 2) if w not in out]
    return tuple(out[:n])


def tags_of(unit: Unit) -> tuple[str, ...]:
    tags: list[str] = []
    for m in unit.messages:
        if m.role == "assistant":
            names = [c.name for c in m.tool_calls] or [first_line(action_text(m)).split(" ")[0]]
            tags.extend(t for t in names if t)
        elif unit.kind == "reader":
            tags.append(speaker_of(m))
    return tuple(dict.fromkeys(tags))[:8]


class RuleRecordWriter:
    """Deterministic records and fields; makes no LLM call."""

    name = "rule"

    def __init__(self, record_words: int = 80, merged_words: int = 120) -> None:
        self.record_words = record_words
        self.merged_words = merged_words

    def write(self, unit: Unit) -> WrittenRecord:
        record = (agent_record(unit, self.record_words) if unit.kind == "agent"
                  else reader_record(unit, self.record_words))
        first_text = next((m.text for m in unit.messages if m.text.strip()), "")
        return WrittenRecord(record=record or "(empty)", keywords=keywords_of(unit), tags=tags_of(unit),
                             description=_short(first_text, 20), writer=self.name)

    def merge(self, texts: Sequence[str]) -> tuple[str, int]:
        per = max(8, self.merged_words // max(1, len(texts)))
        return cut_words(" | ".join(cut_words(t, per) for t in texts), self.merged_words), 0


ChatFn = Callable[[list[dict[str, Any]]], str]

_RECORD_PROMPT = (
    "You write one memory record for a unit of an agent's or a conversation's history. "
    "Reply with JSON only: {{\"record\": str, \"keywords\": [str], \"tags\": [str], "
    "\"description\": str}}. The record has at most {words} words: for agent steps the command "
    "or tool call with its key arguments and the outcome (exit code, error line, key values); "
    "for conversations who said what, keeping names, dates and numbers.\n\nUNIT:\n{raw}"
)
_MERGE_PROMPT = (
    "Merge these consecutive memory records into one record of at most {words} words, in time "
    "order, keeping commands, identifiers, names, dates and numbers. Reply with the record only."
    "\n\n{records}"
)


class LLMRecordWriter:
    """Records written by any chat callable (``list[dict] -> str``), validated, with fallback."""

    name = "llm"

    def __init__(self, chat: ChatFn, record_words: int = 80, merged_words: int = 120,
                 merged_cut_words: int = 150, max_unit_chars: int = 24_000) -> None:
        self.chat = chat
        self.record_words = record_words
        self.merged_words = merged_words
        self.merged_cut_words = merged_cut_words
        self.max_unit_chars = max_unit_chars
        self.fallback = RuleRecordWriter(record_words, merged_words)

    def write(self, unit: Unit) -> WrittenRecord:
        prompt = _RECORD_PROMPT.format(words=self.record_words, raw=unit.raw[: self.max_unit_chars])
        try:
            reply = self.chat([{"role": "user", "content": prompt}])
            data = _parse_json_object(reply)
            record = str(data["record"]).strip()
            if not record:
                raise ValueError("empty record")
            kw = tuple(str(k) for k in data.get("keywords", ()) if str(k).strip())[:12]
            tags = tuple(str(t) for t in data.get("tags", ()) if str(t).strip())[:8]
            desc = _short(str(data.get("description", "")), 25)
        except Exception as exc:  # any failure of the user's model falls back to rules
            log.warning("LLM record writer failed (%s); using the rule writer", exc)
            rule = self.fallback.write(unit)
            return WrittenRecord(rule.record, rule.keywords, rule.tags, rule.description,
                                 writer="rule-fallback", llm_calls=1)
        return WrittenRecord(record=cut_words(record, self.record_words), keywords=kw, tags=tags,
                             description=desc, writer=self.name, llm_calls=1)

    def merge(self, texts: Sequence[str]) -> tuple[str, int]:
        prompt = _MERGE_PROMPT.format(words=self.merged_words, records="\n".join(f"- {t}" for t in texts))
        try:
            reply = str(self.chat([{"role": "user", "content": prompt}])).strip()
            if not reply:
                raise ValueError("empty merged record")
        except Exception as exc:
            log.warning("LLM merge failed (%s); using the rule merge", exc)
            return self.fallback.merge(texts)[0], 1
        return cut_words(reply, self.merged_cut_words), 1


def _parse_json_object(reply: Any) -> dict[str, Any]:
    text = str(reply)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in reply")
    data = json.loads(text[start:end + 1])
    if not isinstance(data, dict) or "record" not in data:
        raise ValueError("reply lacks a record")
    return data
