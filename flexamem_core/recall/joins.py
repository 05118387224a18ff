"""Chosen pieces of a unit shown as verbatim runs: labelled where a run starts inside a turn
or block, ``...`` where text was left out, estimated from stored counts before choosing."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..model.protocols import Tokenizer
from ..model.schema import Piece

PIECES_HEADER = "Recovered pieces (verbatim, grouped by unit in time order; ... marks omitted text):"


def piece_runs(pieces: Sequence[Piece]) -> list[list[Piece]]:
    """Pieces (in order) grouped into runs of consecutive pieces of their unit."""
    runs: list[list[Piece]] = []
    for p in pieces:
        if runs and p.index == runs[-1][-1].index + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def piece_spans(plist: Sequence[Piece], raw: str) -> list[tuple[int, int]] | None:
    """Where each piece of a unit lies in its raw text (pieces are slices, in order, separated
    only by whitespace), or None if the raw text does not hold them."""
    spans, at = [], 0
    for p in plist:
        start = raw.find(p.text, at)
        if start < 0:
            return None
        at = start + len(p.text)
        spans.append((start, at))
    return spans


def omission_join(pieces: Sequence[Piece], total: int, raw: str | None = None,
                  spans: Sequence[tuple[int, int]] | None = None) -> str:
    """Pieces in order as runs of verbatim text: a run that does not begin its turn or block is
    labelled once, where it starts; '...' only where text was left out.

    With the unit's ``raw`` text and :func:`piece_spans`, a run is the slice of the raw text
    from its first piece to the end of its last, so it reads exactly as it was written;
    without them its pieces are joined by newlines."""
    out: list[str] = []
    runs = piece_runs(pieces)
    for k, run in enumerate(runs):
        if run[0].index != (runs[k - 1][-1].index + 1 if k else 0):
            out.append("...")
        if raw is not None and spans is not None:
            text = raw[spans[run[0].index][0]:spans[run[-1].index][1]]
        else:
            text = "\n".join(p.text for p in run)
        out.append(text if run[0].starts_block else f"[{run[0].label}] {text}")
    if pieces and pieces[-1].index != total - 1:
        out.append("...")
    return "\n".join(out)


def verbatim_join(pieces: Sequence[Piece], plist: Sequence[Piece], raw_of: Callable[[], str]) -> str:
    """:func:`omission_join` of a unit's pieces, reading the raw text only when a run has more
    than one piece (a single piece is already verbatim)."""
    if len(piece_runs(pieces)) == len(pieces):
        return omission_join(pieces, len(plist))
    raw = raw_of()
    return omission_join(pieces, len(plist), raw, piece_spans(plist, raw))


def joined_estimate(pieces: Sequence[Piece], total: int, tokenizer: Tokenizer) -> int:
    """Token estimate of :func:`omission_join` from the pieces' stored counts: the pieces, one
    separator between neighbours, a label per run that starts mid-block, the marks."""
    runs = piece_runs(pieces)
    marks = sum(1 for k, run in enumerate(runs) if run[0].index != (runs[k - 1][-1].index + 1 if k else 0))
    marks += 1 if pieces and pieces[-1].index != total - 1 else 0
    labels = sum(tokenizer.count(f"[{run[0].label}] ") for run in runs if not run[0].starts_block)
    return sum(p.tokens + 1 for p in pieces) + 2 * marks + labels


def group_header(label: str) -> str:
    """The line that opens the recovered pieces of a run of units sharing ``label``."""
    return f"== [{label}] =="
