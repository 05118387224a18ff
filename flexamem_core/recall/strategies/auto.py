"""``mode="auto"``: per call, a fixed rule (no LLM) splits the memory between the trace,
whole recovered units and the best pieces (the open problem of the paper's section 6.4).

The rule reads only what a render already has: the call's words (the question, ``query=``,
a human turn, or the newest step), the ranking of every old piece for them (the one piece
recovery uses: BM25, fused with the pieces' cosines unless ``fusion="bm25"``) and the
history kind. Its one signal is the *concentration* of that ranking: the share of the
``top_pieces`` best pieces that lie in the unit holding most of them.

**A question over a history** (``history="reader"``, or a call with a current turn) gets the
best pieces, as piece recovery does, and the timeline's share of the memory depends on how
sure the ranking is: when ``confident_concentration`` of the best pieces fall in one unit,
the timeline gets ``confident_share`` of the room instead of ``rho`` (the trace answers
little that a confident ranking did not find, and every token it gives up holds evidence);
otherwise it keeps ``rho``. When one unit holds ``whole_concentration`` of the best pieces,
it is shown whole first (one verbatim run of all its pieces) if that takes at most
``whole_share`` of the room; the best pieces fill the rest.

**An agent step** (no current turn) keeps its trace: the timeline is merged only as far as
the units the rule *plans* need, and those take at most ``detail_share`` of the memory.
Planned, in this order, each only if its raw text fits the share left: the unit holding the
best match for what a human turn (or ``query=``) asks; the old unit holding
``step_concentration`` of the best pieces for the newest step's words. A planned unit is
shown whole (all its pieces, first, one verbatim run); the room the timeline leaves is
filled with the best pieces for the step (a unit too big to plan still shows its best
pieces there, ranked by the same words). With nothing planned the timeline takes all it
needs.

**A cache-stable request** (the agent default) recovers only what a human turn or ``query=``
asks for: the focus match, shown whole when it renders and raw or as an excerpt when it
extends its memory, and nothing else. Recovered text follows the timeline, so every render
and extension sends it again as new tokens, and what the newest step's words match lies
mostly in the window already; the room it leaves stays with the recent steps, which appending
fills before the next extension. docs/evaluation.md gives the measurement behind this. The
per-call render (``cache_stable=False``) keeps the whole rule.

Every choice is reported (``report["auto"]``): the signal values, the thresholds, what was
planned and why.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...index.arrays import take_ascending
from ...index.fusion import DenseRanking, Ranking, fused_ranking
from ...index.namespace import NamespaceIndex
from ...model.schema import Note
from ..assembly import MemoryRender
from ..candidates import Candidate, candidates, excerpt_scores, focus_first, old_docs, positions
from ..piece_recovery import piece_recovery
from ..timeline import Timeline
from ..unit_recovery import fit_or_degrade, unit_recovery
from .base import Extension, Plan, RecallCall, RecoveryStrategy, Room
from .registry import register_strategy

if TYPE_CHECKING:
    from ...config import FlexAMemConfig


@dataclass(frozen=True)
class AutoRule:
    """The constants of the rule (docs/evaluation.md says where each was chosen)."""

    #: Best pieces whose units define the concentration signal.
    top_pieces: int = 10
    #: Readers: at least this share of the best pieces in one unit = a confident ranking.
    confident_concentration: float = 0.3
    #: Readers: the timeline's share of the memory when the ranking is confident (else ``rho``).
    confident_share: float = 0.1
    #: Readers: a unit holding this share of the best pieces is shown whole ...
    whole_concentration: float = 0.6
    #: ... if its raw text takes at most this share of the memory.
    whole_share: float = 0.35
    #: Agents: the units a step plans to recover take at most this share of the memory.
    detail_share: float = 0.6
    #: Agents: a unit holding this share of the best pieces for the newest step is planned.
    step_concentration: float = 0.5


RULE = AutoRule()


@dataclass
class Signals:
    """What the rule reads, per call."""

    words_from: str
    words: int
    #: Pieces with a lexical match (BM25 > 0) among the old units.
    matched_pieces: int
    #: Share of the ``top_pieces`` best-ranked pieces that lie in the unit holding most of them.
    concentration: float
    #: That unit (position among the old units), or None.
    best_unit: int | None
    #: Units the best pieces fall in.
    units_in_top: int
    #: The best pieces (documents), best first (not reported).
    top_docs: list[int] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        out = asdict(self)
        del out["top_docs"]
        out["concentration"] = round(self.concentration, 4)
        return out


def signals(notes: Sequence[Note], index: NamespaceIndex, words_text: str, words_from: str,
            q_vec: np.ndarray, cfg: FlexAMemConfig, rule: AutoRule | None = None) -> Signals:
    """The signals of one call: ``words_text`` scored against every piece of the old units.

    The ranking is the one piece recovery uses (BM25 fused with the stored piece cosines),
    so a better ranking (a new fusion) sharpens the signals without changing the rule."""
    rule = rule or RULE
    words = index.bm25.query_terms(words_text, cfg.tuning.query_terms)
    docs, pos_of = old_docs(notes, index), positions(notes, index)
    if len(docs) == 0 or not words:
        return Signals(words_from, len(words), 0, 0.0, None, 0)
    bm25 = index.bm25.scores(words)
    matched = int(np.count_nonzero(take_ascending(bm25, docs) > 0))
    ranking: Ranking = DenseRanking(docs, bm25) if cfg.tuning.fusion == "bm25" \
        else fused_ranking(docs, bm25, q_vec, index, cfg)
    k = min(rule.top_pieces, len(docs))
    # the k best pieces, ties by document
    top = ranking.best(k)[:k] if k else np.zeros(0, dtype=np.int64)
    top = top[ranking.score(top) > 0] if len(top) else top
    if len(top) == 0:
        return Signals(words_from, len(words), matched, 0.0, None, 0)
    units = [pos_of[index.doc_unit[int(d)]] for d in top]
    counts: dict[int, int] = {}
    for u in units:
        counts[u] = counts.get(u, 0) + 1
    best = min(counts, key=lambda u: (-counts[u], units.index(u)))  # ties: the unit of the better piece
    return Signals(words_from, len(words), matched, counts[best] / k, best, len(counts),
                   [int(d) for d in top])


def _reader_plan(call: RecallCall, room: Room, rule: AutoRule) -> Plan:
    """A question over a history: the best pieces, the timeline's share by how sure the ranking is,
    and a unit holding most of the best pieces shown whole first if it is small enough."""
    cfg, q = call.cfg, call.query
    sig = signals(call.notes, call.index, q.piece_text, "question", q.vector, cfg, rule)
    confident = sig.concentration >= rule.confident_concentration
    share = min(cfg.tuning.timeline_share, rule.confident_share) if confident else cfg.tuning.timeline_share
    concentrated = sig.best_unit is not None and sig.concentration >= rule.whole_concentration

    def recover(timeline: Timeline) -> MemoryRender:
        left = room.a_mem - timeline.total
        first, shown = _whole_first(call, sig, rule, left) if concentrated else ([], {})
        out = piece_recovery(call.notes, timeline, q.piece_text, q.vector, left, room.allowance, call.index,
                             call.tokenizer, cfg, first=first)
        out.strategy_report = {"recovery": "unit and pieces" if first else "pieces", "whole": shown}
        return out

    report = {"recovery": "pieces", "timeline_share": share, "confident": confident, "whole": {},
              "why": _reader_why(sig, rule, confident, share, concentrated), "signals": sig.report(),
              "thresholds": {"confident_concentration": rule.confident_concentration,
                             "confident_share": rule.confident_share, "rho": cfg.tuning.timeline_share,
                             "whole_concentration": rule.whole_concentration, "whole_share": rule.whole_share,
                             "top_pieces": rule.top_pieces}}
    return Plan(share * room.size_mem, share * room.a_mem if room.a_mem < room.size_mem else None, recover, report)


def _whole_first(call: RecallCall, sig: Signals, rule: AutoRule, left: int) -> tuple[list[int], dict[str, Any]]:
    """The pieces of the unit the best pieces concentrate on, if it takes at most ``whole_share``
    of the ``left`` tokens, and what the report says of it."""
    assert sig.best_unit is not None
    index = call.index
    note = call.notes[sig.best_unit]
    docs = index.unit_docs.get(note.unit_key, range(0))
    size = int(index.doc_tokens_array()[docs.start:docs.stop].sum()) if len(docs) else 0
    fits = 0 < size <= rule.whole_share * left
    return (list(docs) if fits else []), {"unit": note.unit_key, "position": sig.best_unit, "tokens": size,
                                           "limit": int(rule.whole_share * left), "shown": fits}


def _reader_why(sig: Signals, rule: AutoRule, confident: bool, share: float, concentrated: bool) -> str:
    why = (f"a confident ranking (concentration {sig.concentration:.2f} >= {rule.confident_concentration}): "
           f"the best pieces, the timeline within {share} of the memory" if confident else
           f"a diffuse ranking (concentration {sig.concentration:.2f} < {rule.confident_concentration}): the best "
           f"pieces, the timeline keeps rho = {share} of the memory (the trace may answer what they miss)")
    if concentrated:
        why += (f"; one unit holds {sig.concentration:.2f} >= whole_concentration {rule.whole_concentration} of "
                f"the best pieces: it is shown whole first if it takes at most whole_share {rule.whole_share} "
                "of the room (see whole)")
    return why


def _planned_cost(note: Note, left: float, cfg: FlexAMemConfig, record: bool) -> tuple[int, str, int]:
    """What a planned unit takes of the ``left`` tokens of the detail share: its raw text if that
    fits. With ``record`` (the unit layout of an extended memory, fit-or-degrade) else an excerpt:
    its record and up to ``E`` tokens of its best pieces, fewer if the share is short, none
    below half a piece (``kappa / 2``); without, nothing (the best pieces, ranked by the same
    words, carry what the unit has). Returns the tokens, the resolution and the excerpt size."""
    if note.raw_tokens + 8 <= left:
        return note.raw_tokens + 8, "raw", 0
    head = 8 + note.record_tokens
    pieces = min(cfg.tuning.excerpt_tokens, int(left) - head)
    if record and pieces >= cfg.tuning.piece_tokens // 2:
        return head + pieces, "excerpt", pieces
    return 0, "record", 0


def agent_candidates(notes: Sequence[Note], index: NamespaceIndex, cfg: FlexAMemConfig, q_vec: Callable[[], np.ndarray],
                     excerpt_query: str, piece_query: str, focus: str, cap: float, record: bool,
                     rule: AutoRule | None = None, exclude: Sequence[int] = (), stable: bool = False
                     ) -> tuple[list[Candidate], list[dict[str, Any]], Signals, int, int]:
    """The units an agent step plans to recover, within ``cap`` tokens: the unit holding the
    best match for what is asked (``focus``: a human turn or ``query=``), then, unless the
    request is cache-stable (module docstring), the unit that holds ``step_concentration`` of
    the best pieces for the step's words. Returns the planned candidates followed by the
    paper's (for fit-or-degrade; none for a cache-stable request), the plan's report rows, the
    signals, the tokens planned and the largest excerpt size planned (``E`` if none)."""
    rule = rule or RULE
    skip = set(exclude)
    # a cache-stable request plans no concentrated match: its ranking is not made (a pass over
    # every old piece, and the query's vector, off the agent's path)
    sig = Signals("focus" if focus else "newest step", 0, 0, 0.0, None, 0) if stable else \
        signals(notes, index, focus or excerpt_query, "focus" if focus else "newest step", q_vec(), cfg, rule)
    planned: list[Candidate] = []
    rows: list[dict[str, Any]] = []
    need = excerpt = 0

    def plan(pos: int, why: str, score: float) -> None:
        nonlocal need, excerpt
        if pos in skip or any(c.pos == pos for c in planned):
            return
        cost, res, pieces = _planned_cost(notes[pos], cap - need, cfg, record)
        if res == "record":
            return
        need += cost
        excerpt = max(excerpt, pieces)
        planned.append(Candidate(pos, score, why))
        rows.append({"position": pos, "why": why, "planned": res, "tokens": cost})

    if focus:
        found = focus_first([], notes, index, index.bm25.query_terms(focus, cfg.tuning.query_terms))
        if found:
            plan(found[0].pos, "focus match", 1.0)
    if sig.best_unit is not None and sig.concentration >= rule.step_concentration and not stable:
        plan(sig.best_unit, "concentrated match", sig.concentration)
    if stable:
        return planned, rows, sig, need, excerpt or cfg.tuning.excerpt_tokens
    rest = candidates(q_vec(), notes, index, cfg, piece_query)
    taken = {c.pos for c in planned} | skip
    return [*planned, *(c for c in rest if c.pos not in taken)], rows, sig, need, excerpt or cfg.tuning.excerpt_tokens


def _agent_plan(call: RecallCall, room: Room, rule: AutoRule) -> Plan:
    """An agent step: the trace first, the units the rule plans shown whole, the best pieces
    for the step in the room the timeline leaves."""
    cfg, q, notes, index = call.cfg, call.query, call.notes, call.index
    cap = rule.detail_share * room.size_mem
    cands, rows, sig, need, _ = agent_candidates(notes, index, cfg, lambda: q.vector, q.excerpt_text, q.piece_text,
                                                 q.focus, cap, False, rule, stable=call.stable)
    # the trace first: the timeline is merged only down to what the planned units need
    target = max(cfg.tuning.timeline_share * room.size_mem, room.size_mem - need)
    # a big newest unit: per-call renders hide the oldest records down to that for this call; a
    # cache-stable request keeps its trace (it hides only what cannot fit)
    room_for = max(cfg.tuning.timeline_share * room.a_mem, room.a_mem - need) \
        if room.a_mem < room.size_mem and not call.stable else None
    # planned units are shown whole: all their pieces, first, as one verbatim run each
    first = [d for c in cands[:len(rows)] for d in index.unit_docs.get(notes[c.pos].unit_key, range(0))]

    def recover(timeline: Timeline) -> MemoryRender:
        left, allowance = room.a_mem - timeline.total, room.allowance
        if call.stable:  # the planned units only: no best pieces after them (module docstring)
            allowance -= max(0, left - need)
            left = min(left, need)
            if not first:  # the timeline alone: no ranking made, no query embedded
                return unit_recovery(notes, timeline, [], 0, allowance, index, cfg, call.tokenizer,
                                     np.zeros(0), in_place_detail=False)
        return piece_recovery(notes, timeline, q.focus or q.piece_text, q.vector, left, allowance, index,
                              call.tokenizer, cfg, first=first)

    if rows:
        why = (f"the trace first, then {' and '.join(r['why'] for r in rows)} "
               f"({need} tokens planned, at most detail_share {rule.detail_share} of the memory; concentration "
               f"{sig.concentration:.2f}, step_concentration {rule.step_concentration}), then the best pieces "
               "in the room the timeline leaves")
    elif call.stable:
        why = ("a cache-stable request with no unit asked for: the timeline takes the room it needs, the rest "
               "is left to the recent steps")
    else:
        why = (f"no unit asked for or concentrated on (concentration {sig.concentration:.2f} < step_concentration "
               f"{rule.step_concentration}): the timeline takes the room it needs, the best pieces for the step "
               "fill what it leaves")
    recovery = "units and pieces" if rows else "trace and pieces"
    if call.stable:
        recovery = "units" if rows else "trace"
    report = {"recovery": recovery, "planned": rows,
              "planned_tokens": need, "why": why, "signals": sig.report(),
              "thresholds": {"detail_share": rule.detail_share, "step_concentration": rule.step_concentration,
                             "top_pieces": rule.top_pieces, "rho": cfg.tuning.timeline_share}}
    return Plan(target, room_for, recover, report)


@register_strategy
class AutoRecovery(RecoveryStrategy):
    """The automatic split (see the module docstring); ``rule`` holds its constants."""

    name = "auto"
    report_key = "auto"
    extends = True

    def __init__(self, rule: AutoRule = RULE) -> None:
        self.rule = rule

    def plan(self, call: RecallCall, room: Room) -> Plan:
        return _reader_plan(call, room, self.rule) if call.question else _agent_plan(call, room, self.rule)

    def extend(self, call: RecallCall, room: int, shown: set[int]) -> Extension:
        """The unit a human turn or ``query=`` asks for, raw or as an excerpt, by fit-or-degrade
        (an extension is cache-stable: nothing else is recovered, see the module docstring)."""
        cfg, q, notes, index = call.cfg, call.query, call.notes, call.index
        cands, planned, sig, need, excerpt = agent_candidates(notes, index, cfg, lambda: q.vector, q.excerpt_text,
                                                              q.piece_text, q.focus, room, True, self.rule,
                                                              exclude=sorted(shown), stable=True)
        report = {"recovery": "units" if planned else "trace", "planned": planned, "planned_tokens": need,
                  "why": f"extend: the previous memory kept, the records of the units that left the window "
                         f"added, then within the {room} tokens left the unit asked for (focus match), by "
                         "fit-or-degrade",
                  "signals": sig.report()}
        if not cands:
            return Extension(report=report)
        ranges = [index.unit_docs.get(notes[c.pos].unit_key, range(0)) for c in cands]
        scores = excerpt_scores(index, ranges, q.focus or q.excerpt_text, q.vector, cfg)
        return Extension(fit_or_degrade(notes, cands, room, index, cfg, call.tokenizer, scores, lambda pos: 0,
                                        excerpt_tokens=excerpt), report)

    def no_room(self) -> dict[str, Any]:
        return {"recovery": "trace", "why": "extend: no room for recovered detail"}

    def nothing_old(self) -> dict[str, Any]:
        return {"recovery": "none", "why": "no old units to remember"}
