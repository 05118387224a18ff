"""What a render report says about the old units, at the cost of what the call did.

A row per old unit would cost every call in proportion to the whole history, and would
make a mini-swe-agent trajectory saved with ``report: full`` grow with the square of the
run. So a report keeps:

- ``unit_runs``: the old units' positions as runs ``[start, end, resolution]`` of the
  timeline (``hidden``, ``record``, ``merged``), adjacent runs of one resolution joined,
  so there are at most as many as the memory has lines;
- ``units``: one row for each unit the call did something with: a recovery candidate (why,
  score), a unit shown in detail (``raw``, ``excerpt``), a unit with pieces shown
  (``pieces``: how many), a unit that just left the window;
- ``resolutions``: the old units counted by the resolution they were shown at.

:func:`all_unit_rows` expands them to one row per old unit (the replay's strip).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..model.schema import Note
from .timeline import Timeline

#: The resolutions of the old units: shown in detail, then as the timeline shows them.
RESOLUTIONS = ("raw", "excerpt", "record", "merged", "hidden")


def timeline_runs(timeline: Timeline) -> list[list[Any]]:
    """The old units' positions as runs ``[start, end, resolution]`` of this timeline."""
    runs: list[list[Any]] = []
    if timeline.hidden_until:
        runs.append([0, timeline.hidden_until, "hidden"])
    for item in timeline.items:
        add_run(runs, item.start, item.end, "record" if item.level == 0 else "merged")
    return runs


def add_run(runs: list[list[Any]], start: int, end: int, resolution: str) -> None:
    """Append positions ``start..end`` at ``resolution``, joining the last run if it continues."""
    if end <= start:
        return
    if runs and runs[-1][1] == start and runs[-1][2] == resolution:
        runs[-1][1] = end
    else:
        runs.append([start, end, resolution])


def run_resolution(runs: Sequence[Sequence[Any]], pos: int) -> str:
    """The timeline resolution of old unit ``pos`` (``hidden`` if no run has it)."""
    i = bisect_right(runs, pos, key=lambda run: run[0])
    if i and pos < runs[i - 1][1]:
        return str(runs[i - 1][2])
    return "hidden"


def unit_row(pos: int, note: Note, resolution: str, **extra: Any) -> dict[str, Any]:
    """The row of old unit ``pos``, whose note is ``note``."""
    return {"position": pos, "unit": note.unit_key, "label": note.label, "resolution": resolution, **extra}


def unit_rows(notes: Sequence[Note], runs: Sequence[Sequence[Any]], detail: Mapping[int, str],
              why: Mapping[int, tuple[str, float]], pieces: Mapping[int, int] | None = None) -> list[dict[str, Any]]:
    """Rows, in position order, of the units shown in ``detail`` (position -> resolution), the
    candidates in ``why`` (position -> (why, score)) and the units with ``pieces`` shown."""
    rows = []
    for pos in sorted({*detail, *why, *(pieces or ())}):
        row = unit_row(pos, notes[pos], detail.get(pos) or run_resolution(runs, pos))
        if pos in why:
            row["why"], row["score"] = why[pos][0], round(why[pos][1], 6)
        if pieces:
            row["pieces"] = pieces.get(pos, 0)
        rows.append(row)
    return rows


def count_resolutions(runs: Iterable[Sequence[Any]], rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Old units by the resolution they were shown at: the runs' counts, with the units
    shown in detail moved from their timeline resolution to theirs."""
    counts = dict.fromkeys(RESOLUTIONS, 0)
    runs = list(runs)
    for start, end, res in runs:
        counts[res] = counts.get(res, 0) + end - start
    for row in rows:
        res = str(row.get("resolution"))
        under = run_resolution(runs, int(row["position"]))
        if res != under:
            counts[under] -= 1
            counts[res] = counts.get(res, 0) + 1
    return counts


def all_unit_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per old unit of a render report, in position order: the report's row where it
    has one, else the position and its resolution from ``unit_runs``. Walks every old unit:
    for tools that show the whole history (the replay), not for the render."""
    n = int(report.get("old_units") or 0)
    resolution = ["hidden"] * n
    for start, end, res in report.get("unit_runs") or ():
        resolution[start:end] = [str(res)] * (min(end, n) - start)
    rows: list[dict[str, Any]] = [{"position": pos, "resolution": res} for pos, res in enumerate(resolution)]
    for row in report.get("units") or ():
        if 0 <= int(row["position"]) < n:
            rows[int(row["position"])] = dict(row)
    return rows
