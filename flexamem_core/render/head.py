"""The head of a cache-stable request: the oldest old units sent verbatim right after the fixed
prompt, where every earlier call sent them, so they stay a cached prefix instead of being
sent again inside the memory. The head is the longest run of oldest units that leaves the
memory room for a record of every other old unit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..index.namespace import NamespaceIndex
from ..model.protocols import Tokenizer
from ..model.schema import Note, Unit
from ..recall.assembly import memory_wrapper_tokens
from ..recall.report import add_run, count_resolutions, unit_row
from ..recall.timeline import record_line
from ..request.counting import count_messages
from .outcome import Report


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


def with_head(report: Report, head: Sequence[Note], head_messages: int) -> Report:
    """The report of a render with a head: the memory's units renumbered from the first old
    unit, the head's units shown ``raw``, and how many messages the head holds."""
    h = len(head)
    rows = [unit_row(pos, note, "raw", why="kept verbatim ahead of the memory") for pos, note in enumerate(head)]
    rows += [{**r, "position": int(r["position"]) + h} for r in report.units]
    runs: list[list[Any]] = [[0, h, "record"]]
    for start, end, res in report.unit_runs:
        add_run(runs, start + h, end + h, res)
    return replace(report, units=rows, unit_runs=runs, old_units=report.old_units + h,
                   resolutions=count_resolutions(runs, rows), head_units=h, head_messages=head_messages)
