"""The prompt-cache-stable request (``cache_stable``, the agent default).

Providers bill a request prefix they have cached at about a tenth of the price, so a
request that changes near its start on every call is expensive. While a thread's history
only grows, each call is answered with the cheapest of three requests that fit ``B_bar``:

1. **append**: the previous request with the new messages appended verbatim (the whole
   previous request is a cached prefix);
2. **extend**: the previous memory text kept as it is, with the records of the units that
   left the recent window added at its end, then the newest units verbatim (the fixed
   prompt and the previous memory are a cached prefix). Everything after the previous
   memory is sent again whichever units leave, so by default (``stable_extend="evict_all"``)
   every unit but the newest leaves while the memory stays within the allowance the paper's
   render would give it: the request shrinks the most and the most calls append before the
   next extension; ``"to_target"`` keeps the longest run of newest units that keeps the
   request within the fixed prompt plus ``stable_target`` of the rest of ``B_bar``;
3. **render**: a fresh render (the paper's rule) for that same share of the budget, when
   neither fits or the history changed other than by growing.

The first render after the history was sent whole (``stable_head``, on by default) keeps the
oldest old units as their messages right after the fixed prompt, where every earlier call
sent them: that **head** stays a cached prefix instead of being sent again inside the memory,
and it shows those units in full. The head is the longest run of oldest units that leaves the
memory room for a record of every other old unit; extensions keep it, the next render drops it
(kept for good it took room from every later memory: 380 renders instead of 99 over the 100
dev trajectories at 8k).

The paper's render on every call stays available with ``cache_stable=False``. The report
of every call says which of the three it was and how many tokens of the previous request
it reuses as a prefix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..config import FlexAMemConfig
from ..model.messages import Message, quick_fingerprint, same_prefix
from ..model.protocols import Tokenizer
from ..recall.auto import agent_candidates
from ..recall.recovery import MEMORY_CLOSE, Element, candidates, excerpt_scores, fit_or_degrade, memory_wrapper_tokens
from ..recall.report import add_run, count_resolutions, unit_row
from ..recall.timeline import record_line
from ..request.properties import apply_properties, sendable
from ..request.render import PER_MESSAGE, Layout, Rendered, count_messages, memory_message, message_tokens
from ..request.sendable import enforce_part

if TYPE_CHECKING:
    from ..index.namespace import NamespaceIndex
    from ..memory import FlexAMem, _Namespace, _Synced
    from ..model.schema import Note
    from ..write.units import Unit


@dataclass(frozen=True)
class SentRequest:
    """The previous request of a thread and what it was made from."""

    budget: int
    extra_tokens: int
    query: str | None
    source: list[Message]
    messages: list[Message]
    tokens: int
    #: ``source[verbatim_from:]`` ends the request unchanged (None: it was cut or repaired).
    verbatim_from: int | None
    memory_text: str | None
    #: Old units the memory covers (the rest of the history follows it verbatim).
    old_units: int | None
    report: dict[str, Any]
    #: Messages of ``source`` this request was made from: the list may be the namespace's own
    #: copy of the history (:mod:`flexamem_core.model.history`), which later calls grow in place.
    length: int

    @classmethod
    def of(cls, budget: int, extra_tokens: int, query: str | None, source: list[Message],
           rendered: Rendered) -> SentRequest:
        """Remember a request, noting how much of the history ends it unchanged."""
        out = rendered.messages
        n = 0
        while n < min(len(out), len(source)) and (
                out[-1 - n] is source[-1 - n] or
                quick_fingerprint(out[-1 - n]) == quick_fingerprint(sendable(source[-1 - n]))):
            n += 1
        window = len(source) if rendered.passthrough else rendered.report.get("window_messages")
        verbatim_from = len(source) - n if window is not None and n >= window else None
        old_units = None if rendered.passthrough or rendered.memory_text is None else rendered.report.get("old_units")
        return cls(budget, extra_tokens, query, source, list(out), rendered.tokens, verbatim_from,
                   rendered.memory_text, old_units, rendered.report, len(source))

    def same_call(self, budget: int, extra_tokens: int, query: str | None) -> bool:
        """Whether a call has this request's settings (budget, extra tokens, query)."""
        return (self.budget, self.extra_tokens, self.query) == (budget, extra_tokens, query)

    def continues(self, history: Sequence[Message], budget: int, extra_tokens: int, query: str | None) -> bool:
        """Whether ``history`` is this request's history plus new messages, for the same call settings."""
        source = self.source if len(self.source) == self.length else self.source[:self.length]
        return self.same_call(budget, extra_tokens, query) and same_prefix(history, source)

    def after(self, source: list[Message], rendered: Rendered) -> SentRequest:
        """This request once ``rendered`` (an append to it) was sent."""
        return replace(self, source=source, messages=list(rendered.messages), tokens=rendered.tokens,
                       report=rendered.report, length=len(source))


def stable_limit(cfg: FlexAMemConfig, fixed_tokens: int) -> int:
    """Tokens a re-rendered or extended request may fill: the fixed prompt plus
    ``stable_target`` of the rest of ``B_bar`` (the rest is left for appending)."""
    b_bar = cfg.effective_budget
    return fixed_tokens + int(cfg.stable_target * max(0, b_bar - fixed_tokens))


def stable_budget(cfg: FlexAMemConfig, fixed_tokens: int) -> int:
    """The budget whose ``B_bar`` is :func:`stable_limit` (for a fresh render)."""
    return max(1, math.ceil(stable_limit(cfg, fixed_tokens) / cfg.safety_margin))


def append_new(sent: SentRequest, history: list[Message], cfg: FlexAMemConfig, tokenizer: Tokenizer) -> Rendered | None:
    """Step 1: the previous request plus the new messages, if they pair up and it fits.

    The same history again (a retry) gets the same request, whatever it held."""
    new = history[sent.length:]
    if sent.verbatim_from is None and new:
        return None
    if not new:
        return Rendered(list(sent.messages), sent.memory_text, sent.tokens,
                        {**sent.report, "llm_calls": 0,
                         "cache": {"step": "append", "appended": True, "appended_messages": 0,
                                                  "reused_prefix_tokens": sent.tokens}},
                        passthrough=bool(sent.report.get("passthrough", False)))
    if any(m.role == "system" for m in new):
        return None
    if apply_properties([*history[sent.verbatim_from:sent.length], *new]).repairs:
        return None  # the new messages must pair up as they are
    new = [sendable(m) for m in new]  # sent as counted: control characters and lone surrogates cleaned
    tokens = sent.tokens + sum(message_tokens(m, tokenizer) for m in new)
    if tokens > cfg.effective_budget:
        return None
    report = {**sent.report, "total_tokens": tokens, "llm_calls": 0,
              "cache": {"step": "append", "appended": True, "appended_messages": len(new),
                        "reused_prefix_tokens": sent.tokens}}
    return Rendered([*sent.messages, *new], sent.memory_text, tokens, report,
                    passthrough=bool(sent.report.get("passthrough", False)))


def extend_memory(mem: FlexAMem, space: _Namespace, sent: SentRequest, layout: Layout, cfg: FlexAMemConfig,
                  extra_tokens: int, synced: _Synced) -> Rendered | None:
    """Step 2: keep the previous memory, add the records of the units that left the window."""
    if sent.memory_text is None or sent.old_units is None or not sent.memory_text.endswith("\n" + MEMORY_CLOSE):
        return None
    tk = mem.tokenizer
    units = synced.units
    all_units: list[Any] = [*units, *([synced.tail] if synced.tail else [])]
    start = sent.old_units
    if start > len(units) or not all_units:
        return None
    index = space.index
    body = layout.body
    fixed = layout.fixed
    n_head = int(sent.report.get("head_messages", 0))
    head_msgs = sent.messages[len(fixed):len(fixed) + n_head]
    fixed_tokens = count_messages([*fixed, *head_msgs], tk, extra_tokens)
    b_bar = cfg.effective_budget
    limit = stable_limit(cfg, fixed_tokens)
    # The memory may grow up to what the paper's render would allow it at this budget.
    mem_cap = b_bar - fixed_tokens - int(cfg.window_share * cfg.budget) - PER_MESSAGE
    text_head = sent.memory_text[: -len(MEMORY_CLOSE)]
    mem_tokens = tk.count(sent.memory_text)
    lines: list[str] = []
    sizes = [count_messages(u.messages, tk) - 3 for u in all_units[start:]]
    window_tokens = sum(sizes)
    chosen: tuple[int, int] | None = None  # (old units, memory tokens) of the extension made
    evict_all = cfg.stable_extend == "evict_all"
    for n_old in range(start, len(all_units)):
        if n_old > start:
            note = index.note(units[n_old - 1].key)
            lines.append(record_line(note))
            mem_tokens += tk.count(lines[-1]) + 1
            window_tokens -= sizes[n_old - 1 - start]
        if n_old == start:
            continue  # the window must give up at least one unit, or nothing changes
        if mem_tokens > mem_cap:
            break
        total = fixed_tokens + PER_MESSAGE + mem_tokens + window_tokens + PER_MESSAGE * (len(all_units) - n_old)
        if total > b_bar:
            continue
        # evict_all: the most units the memory takes (what follows it is sent again either way);
        # to_target: the fewest that bring the request within the target, else within B_bar
        fits_target = total <= limit
        if evict_all or fits_target or chosen is None:
            chosen = (n_old, mem_tokens)
        if fits_target and not evict_all:
            break
    if chosen is None:
        return None
    n_old, mem_tokens = chosen
    lines = lines[: n_old - start]
    n_window = sum(len(u.messages) for u in all_units[n_old:])
    part = enforce_part(body[len(body) - n_window:])
    if part.repairs:
        return None
    window = part.messages
    pinned = [sendable(m) for m in mem._pinned_turn(space, n_old, window)]
    rows = {int(r["position"]): r for r in sent.report.get("units", [])}
    rows.update((pos, unit_row(pos, index.note(units[pos].key), "record", why="left the window"))
                for pos in range(start, n_old))
    runs = [list(r) for r in sent.report.get("unit_runs", [])]
    add_run(runs, start, n_old, "record")
    base = count_messages([*fixed, *head_msgs, *pinned, *window], tk, extra_tokens) + PER_MESSAGE
    details, auto = _fresh_detail(mem, space, cfg, layout, all_units[n_old:], units[:n_old], list(rows.values()),
                                  min(limit - base - mem_tokens, mem_cap - mem_tokens))
    text_head += "".join(f"{line}\n" for line in lines)
    while True:
        text = text_head + "".join(f"{e.text}\n" for e in sorted(details, key=lambda e: e.pos)) + MEMORY_CLOSE
        messages = [*map(sendable, fixed), *head_msgs, memory_message(text), *pinned, *window]
        tokens = count_messages(messages, tk, extra_tokens)
        if tokens <= b_bar or not details:
            break
        details = details[:-1]  # the estimate was short: drop the lowest-ranked detail
    if tokens > b_bar:
        return None
    for e in details:
        rows[e.pos] = {**(rows.get(e.pos) or unit_row(e.pos, index.note(units[e.pos].key), e.resolution)),
                       "resolution": e.resolution, "why": "recovered when the memory grew"}
    unit_list = [rows[pos] for pos in sorted(rows)]
    report = {**sent.report, "total_tokens": tokens, "llm_calls": 0, "old_units": n_old,
              "window_units": len(all_units) - n_old, "window_messages": len(window),
              "window_tokens": count_messages([*pinned, *window], tk) - 3, "memory_tokens": tk.count(text),
              # the allowance stays the one of the render this memory grew from
              "unused_allowance": max(0, sent.report.get("allowance", 0) - tk.count(text)),
              "units": unit_list, "unit_runs": runs, "resolutions": count_resolutions(runs, unit_list),
              "cache": {"step": "extend", "extended_units": n_old - start,
                                       "recovered_units": len(details)}}
    if auto is not None:
        report["auto"] = {**auto, "kept": len(details)}
    return Rendered(messages, text, tokens, report)


def _fresh_detail(mem: FlexAMem, space: _Namespace, cfg: FlexAMemConfig, layout: Layout, window_units: Sequence[Any],
                  old: Sequence[Any], rows: Sequence[dict[str, Any]], room: int
                  ) -> tuple[list[Element], dict[str, Any] | None]:
    """Recovered units for this call's query, for the memory's end: fit-or-degrade over the
    candidates the memory does not show in detail yet, within ``room`` tokens.

    ``mode="auto"`` puts first the units its rule plans for an agent step (a focus match, a
    concentrated match) and says so; returns the elements and that report (None otherwise)."""
    auto = cfg.mode == "auto" and cfg.recovery and not cfg.random_candidates
    if room <= 0 or not cfg.recovery or cfg.mode not in ("unit", "auto") or not old:
        return [], ({"recovery": "trace", "why": "extend: no room for recovered detail"} if auto else None)
    index = space.index
    notes = index.notes_of_units(old)
    shown = {r["position"] for r in rows if r.get("resolution") in ("raw", "excerpt")}
    q_vec, excerpt_query, piece_query = mem._queries(cfg, layout, window_units, None)
    report = None
    focus = mem._focus(cfg, window_units, None) if auto else ""
    if auto:
        cands, planned, sig, need, excerpt = agent_candidates(notes, index, cfg, q_vec, excerpt_query, piece_query,
                                                              focus, room, True, exclude=sorted(shown))
        if excerpt != cfg.excerpt_tokens:
            cfg = cfg.model_copy(update={"excerpt_tokens": excerpt})
        report = {"recovery": "units" if planned else "trace", "planned": planned, "planned_tokens": need,
                  "why": f"extend: the previous memory kept, the records of the units that left the window "
                         f"added, then within the {room} tokens left the units planned (focus match, concentrated "
                         "match), then the paper's candidates, by fit-or-degrade",
                  "signals": sig.report()}
    else:
        cands = [c for c in candidates(q_vec, notes, index, cfg, piece_query) if c.pos not in shown]
    ranges = [index.unit_docs.get(notes[c.pos].unit_key, range(0)) for c in cands]
    scores = excerpt_scores(index, ranges, focus or excerpt_query, q_vec, cfg) if auto else \
        index.bm25.scores_in(index.bm25.query_terms(excerpt_query, cfg.query_terms), ranges)
    return fit_or_degrade(notes, cands, room, index, cfg, mem.tokenizer, scores, lambda pos: 0), report


def head_units(old: Sequence[Unit], index: NamespaceIndex, tokenizer: Tokenizer, allowance: int) -> list[Unit]:
    """The oldest of ``old`` to send verbatim ahead of the memory: the longest run whose tokens
    leave ``allowance`` room for the memory's wrapper and a record line of every other old unit
    (never all of them: one old unit at least stays in the memory)."""
    rest = memory_wrapper_tokens(tokenizer)
    lines: list[int] = []
    for u in old:  # stops as soon as the records alone are over: a head needs a short history
        lines.append(tokenizer.count(record_line(index.note(u.key))) + 1)
        rest += lines[-1]
        if rest > allowance:
            return []
    used = 0
    out: list[Unit] = []
    for u, line in zip(old[:-1], lines):
        used += count_messages(u.messages, tokenizer) - 3
        rest -= line
        if used + rest > allowance:
            break
        out.append(u)
    return out


def shift_for_head(report: dict[str, Any], head: Sequence[Note], head_messages: int) -> None:
    """The report of a render with a head: the memory's units renumbered from the first old
    unit, the head's units shown ``raw``, and how many messages the head holds."""
    h = len(head)
    rows = [unit_row(pos, note, "raw", why="kept verbatim ahead of the memory") for pos, note in enumerate(head)]
    rows += [{**r, "position": int(r["position"]) + h} for r in report["units"]]
    runs: list[list[Any]] = [[0, h, "record"]]
    for start, end, res in report["unit_runs"]:
        add_run(runs, start + h, end + h, res)
    report.update(units=rows, unit_runs=runs, old_units=report["old_units"] + h,
                  resolutions=count_resolutions(runs, rows), head_units=h, head_messages=head_messages)
