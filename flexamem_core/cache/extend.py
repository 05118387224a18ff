"""Extending the previous memory: its text kept as it is, the records of the units that left
the recent window added at its end, fresh detail for this call after them, then the newest
units verbatim. The fixed prompt and the previous memory stay a cached prefix. A memory that
can grow no more is compacted instead (:mod:`.compact`).

Everything after the previous memory is sent again whichever units leave, so by default
(``stable_extend="evict_all"``) every unit but the newest leaves while the memory stays
within the allowance the paper's render would give it: the request shrinks the most and the
most calls append before the next extension; ``"to_target"`` keeps the longest run of
newest units that keeps the request within the fixed prompt plus ``stable_target`` of the
rest of ``B_bar``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..config import FlexAMemConfig
from ..index.namespace import NamespaceIndex
from ..model.messages import Message
from ..model.protocols import RecordWriter, Tokenizer
from ..model.schema import Unit
from ..recall.assembly import MEMORY_CLOSE, Element
from ..recall.queries import QueryMaker
from ..recall.report import add_run, count_resolutions, run_resolution, unit_row
from ..recall.revealed import revealed_ledger
from ..recall.strategies.base import Extension, RecallCall, RecoveryStrategy
from ..recall.timeline import record_line
from ..render.outcome import CacheStep, Outcome
from ..render.state import NamespaceState
from ..render.sync import Synced
from ..render.window import pinned_turn
from ..request.counting import PER_MESSAGE, count_messages
from ..request.layout import Layout
from ..request.marker import memory_message
from ..request.parts import enforce_part
from ..request.properties import sendable
from ..write.identifiers import identifiers_in
from .compact import Compacted, compact
from .sent import SentRequest
from .target import stable_limit


@dataclass
class _Eviction:
    """The units an extension moves from the window into the memory, and their record lines."""

    n_old: int
    mem_tokens: int
    lines: list[str]
    #: Tokens the request has left under ``B_bar`` after this eviction.
    slack: int = 0


@dataclass
class _Growth:
    """How the memory grows this call: the eviction with its lines, the text they follow, the
    previous rows and runs still shown, the leading records after it, and a compaction's LLM calls."""

    ev: _Eviction
    kept: str
    rows: list[dict[str, Any]]
    runs: list[list[Any]]
    records: tuple[int, int] | None
    compacted: bool = False
    llm_calls: int = 0


def revealed_lines(index: NamespaceIndex, units: Sequence[Unit], all_units: Sequence[Any], layout: Layout,
                   cfg: FlexAMemConfig, tokenizer: Tokenizer, memory_text: str, ev: _Eviction, start: int,
                   room: int) -> _Eviction:
    """The eviction with what old steps revealed (:mod:`flexamem_core.recall.revealed`) in
    ``room`` tokens at most: ranked as a render ranks them, by the text left after the memory,
    over every old unit; those not in the memory yet go on the record line of the unit that
    printed them if it is one appended now, else on one line after them that names the step."""
    if room <= 0 or cfg.history != "agent":
        return ev
    ledger = revealed_ledger(index, index.notes_of_units(units[:ev.n_old]))
    after = "\n".join(m.text for u in all_units[ev.n_old:] for m in u.messages)
    fixed = "\n".join(m.text for m in layout.fixed)
    text = memory_text + "\n" + "\n".join(ev.lines)
    shown = set(identifiers_in(text))  # one pass: most candidates shown are passed over without a search
    chosen = ledger.choose(ev.n_old, room, after, fixed, tokenizer, skip=shown.__contains__, shown=text)
    if not chosen.by_unit:
        return ev
    lines, added = list(ev.lines), 0
    for k, pos in enumerate(range(start, ev.n_old)):
        if chosen.by_unit.get(pos):  # only the lines that change are counted again
            grown = lines[k] + chosen.suffix((pos,))
            added += tokenizer.count(grown) - tokenizer.count(lines[k])
            lines[k] = grown
    earlier = chosen.earlier_line(lambda pos: index.note(units[pos].key).label, start)
    if earlier:
        lines.append(earlier)
        added += tokenizer.count(earlier) + 1
    return _Eviction(ev.n_old, ev.mem_tokens + added, lines, ev.slack - added)


class Extender:
    """Extends a thread's previous memory (see the module docstring)."""

    def __init__(self, strategy: RecoveryStrategy, queries: QueryMaker, tokenizer: Tokenizer,
                 writer: RecordWriter) -> None:
        self.strategy, self.queries, self.tokenizer, self.writer = strategy, queries, tokenizer, writer

    def extend(self, state: NamespaceState, sent: SentRequest, layout: Layout, cfg: FlexAMemConfig,
               extra_tokens: int, synced: Synced) -> Outcome | None:
        """The extended request, or None where the previous memory cannot be kept or nothing fits.
        A memory that can grow no more is compacted (:mod:`.compact`) instead."""
        text = sent.outcome.memory_text
        if text is None or sent.old_units is None or not text.endswith("\n" + MEMORY_CLOSE):
            return None
        tk, units = self.tokenizer, synced.units
        all_units: list[Any] = [*units, *([synced.tail] if synced.tail else [])]
        start = sent.old_units
        if start > len(units) or not all_units:
            return None
        fixed, report = layout.fixed, sent.outcome.report
        head_msgs = sent.messages[len(fixed):len(fixed) + (report.head_messages or 0)]
        fixed_tokens = count_messages([*fixed, *head_msgs], tk, extra_tokens)
        limit = stable_limit(cfg, fixed_tokens)
        # The memory may grow up to what the paper's render would allow it at this budget.
        mem_cap = cfg.effective_budget - fixed_tokens - int(cfg.tuning.window_share * cfg.budget) - PER_MESSAGE
        grown = self._grow(state, sent, units, all_units, layout, cfg, fixed_tokens, limit, mem_cap)
        if grown is None:
            return None
        ev, kept, rows, runs = grown.ev, grown.kept, grown.rows, grown.runs
        part = enforce_part(layout.body[len(layout.body) - sum(len(u.messages) for u in all_units[ev.n_old:]):])
        if part.repairs:
            return None
        window = part.messages
        pinned = [sendable(m) for m in pinned_turn(state, ev.n_old, window, "agent", cfg)]
        base = count_messages([*fixed, *head_msgs, *pinned, *window], tk, extra_tokens) + PER_MESSAGE
        fresh = self._fresh(state, cfg, layout, all_units[ev.n_old:], units[:ev.n_old], rows,
                            min(limit - base - ev.mem_tokens, mem_cap - ev.mem_tokens))
        head_text = kept + "".join(f"{line}\n" for line in ev.lines)
        before = [*map(sendable, fixed), *head_msgs]
        built = self._assemble(head_text, fresh.elements, before, [*pinned, *window], cfg, extra_tokens)
        if built is None:
            return None
        messages, memory, tokens, details = built
        if not grown.compacted:
            add_run(runs, start, ev.n_old, "record")
        rows = self._rows(state.index, rows, runs, units, start, ev.n_old, details)
        return Outcome(messages, memory, tokens, replace(
            report, total_tokens=tokens, llm_calls=grown.llm_calls, old_units=ev.n_old,
            window_units=len(all_units) - ev.n_old, window_messages=len(window),
            window_tokens=count_messages([*pinned, *window], tk) - 3, memory_tokens=tk.count(memory),
            # the allowance stays the one of the render this memory grew from
            unused_allowance=max(0, report.allowance - tk.count(memory)), units=rows, unit_runs=runs,
            resolutions=count_resolutions(runs, rows),
            cache=CacheStep("compact" if grown.compacted else "extend", False, extended_units=ev.n_old - start,
                            recovered_units=len(details), kept_memory_chars=len(kept) if grown.compacted else None),
            strategy=(report.strategy[0], {**(fresh.report or {}), "kept": len(details)})
            if report.strategy is not None and fresh.report is not None else report.strategy), grown.records)

    def _grow(self, state: NamespaceState, sent: SentRequest, units: Sequence[Unit], all_units: Sequence[Any],
              layout: Layout, cfg: FlexAMemConfig, fixed_tokens: int, limit: int, mem_cap: int) -> _Growth | None:
        """An eviction with its identifiers after the previous memory, else a compaction of it
        (:mod:`.compact`); None where neither fits."""
        tk, outcome, start = self.tokenizer, sent.outcome, sent.old_units or 0
        text, report = outcome.memory_text or "", outcome.report
        ev = self._evict(state.index, units, all_units, start, tk.count(text), fixed_tokens, cfg, limit, mem_cap)
        if ev is not None:
            if cfg.tuning.revealed_share > 0:
                ev = revealed_lines(state.index, units, all_units, layout, cfg, tk, text, ev, start,
                                    min(int(cfg.tuning.revealed_share * mem_cap), cfg.tuning.revealed_tokens,
                                        mem_cap - ev.mem_tokens, ev.slack))
            return _Growth(ev, text[: -len(MEMORY_CLOSE)], list(report.units), [list(r) for r in report.unit_runs],
                           outcome.records)
        compacted = self._compacted(state.index, sent, units, all_units, layout, cfg, mem_cap)
        if compacted is None:
            return None
        total = fixed_tokens + PER_MESSAGE + compacted.tokens + count_messages(all_units[-1].messages, tk) - 3 \
            + PER_MESSAGE
        if total > cfg.effective_budget:
            return None
        ev = _Eviction(len(all_units) - 1, compacted.tokens, compacted.lines, cfg.effective_budget - total)
        return _Growth(ev, compacted.kept, [], compacted.runs, compacted.records, True, compacted.llm_calls)

    def _compacted(self, index: NamespaceIndex, sent: SentRequest, units: Sequence[Unit], all_units: Sequence[Any],
                   layout: Layout, cfg: FlexAMemConfig, mem_cap: int) -> Compacted | None:
        """The previous memory compacted (:mod:`.compact`), every unit but the newest leaving the
        window; None where it has no leading records to keep or they leave no room."""
        text, records = sent.outcome.memory_text or "", sent.outcome.records
        if records is None or cfg.tuning.stable_extend != "evict_all":
            return None
        chars, kept_units = records
        if not 0 < chars < len(text) - len(MEMORY_CLOSE) or text[chars - 1] != "\n" \
                or kept_units > (sent.old_units or 0) or len(all_units) - 1 > len(units):
            return None
        runs = [[a, min(b, kept_units), res] for a, b, res in sent.outcome.report.unit_runs if a < kept_units]
        recent = "\n".join(m.text for m in all_units[-1].messages)
        fixed = "\n".join(m.text for m in layout.fixed)
        return compact(index, units, text[:chars], kept_units, len(all_units) - 1, runs, recent, fixed, cfg,
                       self.writer, self.tokenizer, mem_cap)

    def _evict(self, index: NamespaceIndex, units: Sequence[Unit], all_units: Sequence[Any], start: int,
               mem_tokens: int, fixed_tokens: int, cfg: FlexAMemConfig, limit: int, mem_cap: int) -> _Eviction | None:
        """How many units leave the window: evict_all, the most the memory takes (what follows it is
        sent again either way); to_target, the fewest that bring the request within the target,
        else within ``B_bar``. None if no eviction fits."""
        tk = self.tokenizer
        lines: list[str] = []
        sizes = [count_messages(u.messages, tk) - 3 for u in all_units[start:]]
        window_tokens = sum(sizes)
        chosen: tuple[int, int, int] | None = None  # (old units, memory tokens, total) of the extension made
        evict_all = cfg.tuning.stable_extend == "evict_all"
        for n_old in range(start + 1, len(all_units)):  # the window gives up at least one unit
            lines.append(record_line(index.note(units[n_old - 1].key)))
            mem_tokens += tk.count(lines[-1]) + 1
            window_tokens -= sizes[n_old - 1 - start]
            if mem_tokens > mem_cap:
                break
            total = fixed_tokens + PER_MESSAGE + mem_tokens + window_tokens + PER_MESSAGE * (len(all_units) - n_old)
            if total > cfg.effective_budget:
                continue
            fits_target = total <= limit
            if evict_all or fits_target or chosen is None:
                chosen = (n_old, mem_tokens, total)
            if fits_target and not evict_all:
                break
        if chosen is None:
            return None
        return _Eviction(chosen[0], chosen[1], lines[: chosen[0] - start], cfg.effective_budget - chosen[2])

    def _fresh(self, state: NamespaceState, cfg: FlexAMemConfig, layout: Layout, window_units: Sequence[Any],
               old: Sequence[Unit], rows: Sequence[dict[str, Any]], room: int) -> Extension:
        """Recovered units for this call's query, for the memory's end, within ``room`` tokens:
        the strategy's extension detail over the units the memory does not show in detail yet."""
        if room <= 0 or not old or not self.strategy.extends:
            return Extension(report=self.strategy.no_room())
        notes = state.index.notes_of_units(old)
        shown = {r["position"] for r in rows if r.get("resolution") in ("raw", "excerpt")}
        query = self.queries.make(cfg, layout.task, layout.current, window_units, None)
        call = RecallCall(notes, state.index, cfg, self.tokenizer, query, False, True)
        return self.strategy.extend(call, room, shown)

    def _assemble(self, head_text: str, details: list[Element], before: list[Message], after: list[Message],
                  cfg: FlexAMemConfig, extra_tokens: int) -> tuple[list[Message], str, int, list[Element]] | None:
        """The request with the extended memory; the lowest-ranked detail dropped while it is over."""
        while True:
            text = head_text + "".join(f"{e.text}\n" for e in sorted(details, key=lambda e: e.pos)) + MEMORY_CLOSE
            messages = [*before, memory_message(text), *after]
            tokens = count_messages(messages, self.tokenizer, extra_tokens)
            if tokens <= cfg.effective_budget or not details:
                break
            details = details[:-1]  # the estimate was short: drop the lowest-ranked detail
        if tokens > cfg.effective_budget:
            return None
        return messages, text, tokens, details

    @staticmethod
    def _rows(index: NamespaceIndex, rows_before: Sequence[dict[str, Any]], runs: Sequence[Sequence[Any]],
              units: Sequence[Unit], start: int, n_old: int, details: Sequence[Element]) -> list[dict[str, Any]]:
        """The report's unit rows: those kept from the previous memory, the units that left the
        window (as the timeline shows them), the fresh detail."""
        rows = {int(r["position"]): r for r in rows_before}
        rows.update((pos, unit_row(pos, index.note(units[pos].key), run_resolution(runs, pos), why="left the window"))
                    for pos in range(start, n_old))
        for e in details:
            rows[e.pos] = {**(rows.get(e.pos) or unit_row(e.pos, index.note(units[e.pos].key), e.resolution)),
                           "resolution": e.resolution, "why": "recovered when the memory grew"}
        return [rows[pos] for pos in sorted(rows)]
