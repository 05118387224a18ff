"""The LLM-free measures: is the evidence in the rendered context, are reused details kept.

Everything here is a pure function of strings so that anyone can recompute the measures
from ``renders.jsonl``. Matching is verbatim after whitespace normalisation (every run of
whitespace becomes one space), because a memory may re-indent or re-wrap nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from flexamem_core import Tokenizer
from flexamem_core.write.pieces import cut_block

#: Piece size of the evidence measure (kappa of the paper): a turn "appears in part" when
#: at least one of its pieces appears verbatim.
PIECE_TOKENS = 150

#: Identifier- or path-like strings of an action (:func:`detail_strings`).
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{5,}")
_HUMP = re.compile(r"[a-z][A-Z]")


def normalize(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends."""
    return " ".join(text.split())


# ------------------------------------------------------------------------ evidence turns

def turn_pieces(text: str, tokenizer: Tokenizer, header: str = "",
                piece_tokens: int = PIECE_TOKENS) -> list[str]:
    """The pieces of one turn: cut at line breaks, at most ``piece_tokens`` tokens each.

    Cut exactly as the core cuts the turn's block (``header`` line, then the turn) with
    :func:`flexamem_core.write.pieces.cut_block`, then with the header removed, so a method
    that shows one piece of the turn shows one of these verbatim.
    """
    block = f"{header}\n{text}" if header else text
    out = []
    for part, _ in cut_block(block, tokenizer, piece_tokens):
        if header and part.startswith(header):
            part = part[len(header):]
        if normalize(part):
            out.append(part)
    return out


@dataclass(frozen=True)
class EvidenceTurn:
    """A turn prepared for matching: its normalised text and normalised pieces."""

    turn_id: str
    text: str
    pieces: tuple[str, ...]

    @classmethod
    def build(cls, turn_id: str, text: str, tokenizer: Tokenizer, header: str = "") -> EvidenceTurn:
        pieces = turn_pieces(text, tokenizer, header)
        return cls(turn_id, normalize(text), tuple(normalize(p) for p in pieces))


@dataclass(frozen=True)
class EvidenceResult:
    """Which evidence turns of one question a rendered context shows, in full or in part."""

    full: tuple[bool, ...]
    part: tuple[bool, ...]

    @property
    def all_shown(self) -> bool:
        """Every evidence turn appears at least in part (``questions_all_evidence``)."""
        return all(self.part)


def evidence_shown(context_text: str, turns: Sequence[EvidenceTurn]) -> EvidenceResult:
    """Match evidence turns against a rendered context (whitespace-normalised substrings)."""
    context = normalize(context_text)
    full = tuple(bool(t.text) and t.text in context for t in turns)
    part = tuple(f or any(p in context for p in t.pieces) for f, t in zip(full, turns, strict=True))
    return EvidenceResult(full=full, part=part)


# -------------------------------------------------------------------- trajectory details

def detail_strings(action: str) -> list[str]:
    """Identifier- or path-like strings of an action, in order, without duplicates.

    Matches of :data:`IDENTIFIER` with trailing dots stripped that contain one of ``_ . /``,
    a digit, or a lower-to-upper camelCase hump.
    """
    out: list[str] = []
    for match in IDENTIFIER.findall(action):
        s = match.rstrip(".")
        if not s or s in out:
            continue
        if any(c in s for c in "_./") or any(c.isdigit() for c in s) or _HUMP.search(s):
            out.append(s)
    return out


@dataclass(frozen=True)
class StepTarget:
    """What the context before one action should still hold.

    ``step`` is the 0-based index of the action among the assistant messages;
    ``message_index`` the position of that assistant message in the trajectory (the
    context is rendered from the messages before it). ``task`` is the task's text: a
    context that drops it leaves the agent without its instructions, which neither recall
    measure sees (a reused detail is by definition absent from the task).
    """

    step: int
    message_index: int
    reused: tuple[str, ...]
    earlier_commands: tuple[str, ...]
    task: str = ""
    #: The reused details absent from the newest observations before the action (see
    #: :func:`step_targets`): what a memory is for, since every method keeps the newest ones.
    far: tuple[str, ...] = ()


def first_line(command: str) -> str:
    """The first non-blank line of a command, whitespace-normalised."""
    for line in command.split("\n"):
        if line.strip():
            return normalize(line)
    return ""


def step_targets(task: str, actions: Sequence[tuple[int, str]],
                 observations_before: Sequence[str], newest_before: Sequence[str] | None = None) -> list[StepTarget]:
    """Targets of every step of a trajectory.

    ``actions`` holds ``(message_index, action_text)`` per assistant message in order;
    ``observations_before[k]`` is the text of all observations seen before action ``k``, and
    ``newest_before[k]`` that of the newest few (:data:`NEAR_OBSERVATIONS`). A reused detail of
    step t is a :func:`detail_strings` match of action t that is absent from the task and from
    every earlier action but present in an earlier observation; it is far when none of the
    newest observations holds it.
    """
    targets = []
    for step, (index, action) in enumerate(actions):
        earlier = [a for _, a in actions[:step]]
        seen = observations_before[step]
        reused = tuple(s for s in detail_strings(action)
                       if s not in task and not any(s in a for a in earlier) and s in seen)
        newest = newest_before[step] if newest_before is not None else seen
        commands = tuple(c for c in (first_line(a) for a in earlier) if c)
        targets.append(StepTarget(step=step, message_index=index, reused=reused, earlier_commands=commands,
                                  task=task, far=tuple(s for s in reused if s not in newest)))
    return targets


#: A reused detail is near when one of this many observations before the action holds it.
NEAR_OBSERVATIONS = 2


@dataclass(frozen=True)
class StepResult:
    """Hits and totals of one step's two recall measures, and whether the task was sent whole."""

    reused_hits: int
    reused_total: int
    trace_hits: int
    trace_total: int
    task_kept: bool = True
    far_hits: int = 0
    far_total: int = 0


def score_step(context_text: str, target: StepTarget) -> StepResult:
    """Count the reused details and earlier command first lines present in a context, and
    check that the task is in it verbatim."""
    normalized = normalize(context_text)
    reused_hits = sum(1 for s in target.reused if s in context_text)
    trace_hits = sum(1 for c in target.earlier_commands if c in normalized)
    far_hits = sum(1 for s in target.far if s in context_text)
    return StepResult(reused_hits, len(target.reused), trace_hits, len(target.earlier_commands),
                      task_kept=target.task in context_text, far_hits=far_hits, far_total=len(target.far))


# -------------------------------------------------------------------------- aggregation

def share(hits: int, total: int) -> float | None:
    """``hits / total``, or None when there is nothing to measure."""
    return hits / total if total else None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (numpy's linear interpolation), None for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None


def clustered_share_ci(hits: Sequence[int], totals: Sequence[int], level: float = 0.95,
                       resamples: int = 2000) -> tuple[float, float] | None:
    """A percentile bootstrap interval of ``sum(hits) / sum(totals)`` with whole clusters
    (one per trajectory or question) resampled, as their strings are not independent: a
    few steps that reuse many strings of one file carry a large share of a trajectory
    measure. Seeded, so the same records give the same interval; None without data."""
    from scipy.stats import bootstrap

    h = np.asarray(hits, dtype=float)
    t = np.asarray(totals, dtype=float)
    if len(h) < 2 or t.sum() == 0:
        return None

    def ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return a.sum(axis=axis) / np.maximum(b.sum(axis=axis), 1e-12)

    res = bootstrap((h, t), ratio, paired=True, vectorized=True, n_resamples=resamples,
                    confidence_level=level, method="percentile", rng=np.random.default_rng(0))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)

