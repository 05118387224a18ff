"""The memory text: the timeline's lines with recovered elements in place of their records or
after them, wrapped in the ``<memory>`` tags, counted exactly, and shrunk to the allowance."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model.protocols import Tokenizer
from ..model.schema import Note
from ..request.tokens import count_concat
from .timeline import Timeline

MEMORY_OPEN = "<memory>"
MEMORY_CLOSE = "</memory>"
MEMORY_INTRO = ("Earlier history. Records run oldest first; entries marked raw, excerpt or piece are "
                "verbatim text of that history, placed after the records they were recovered with.")

#: A text in parts, each with its exact count where one is stored (else None).
Segments = tuple[tuple[str, int | None], ...]


def stored_raw_tokens(note: Note, tokenizer: Tokenizer) -> int | None:
    """The note's count of its unit's raw text where a tokenizer of this name made it, else None."""
    return note.raw_tokens if note.counted_by == tokenizer.name else None


@dataclass
class Element:
    """Recovered text for one unit (or the pieces of one unit) placed into the timeline."""

    pos: int
    rank: int
    resolution: str
    text: str
    tokens: int
    in_place: bool
    #: ``text`` in parts, each with its exact count where one is stored (a raw unit's text,
    #: counted by this tokenizer when written): :meth:`Assembler.measure` counts only the rest.
    parts: Segments = ()

    def segments(self) -> Segments:
        return self.parts or ((self.text, None),)


@dataclass
class MemoryRender:
    text: str
    tokens: int
    spent: dict[str, int]
    #: Rows of the units this call did something with (:mod:`.unit_report`).
    units: list[dict[str, Any]] = field(default_factory=list)
    pieces: list[dict[str, Any]] = field(default_factory=list)
    #: The old units' positions as timeline runs ``[start, end, resolution]``.
    unit_runs: list[list[Any]] = field(default_factory=list)
    llm_calls: int = 0
    #: Recovered elements chosen but dropped by the final shrink loop (framing underestimated).
    dropped: int = 0
    #: Piece recovery: the tokens the chosen pieces were charged before choosing (their own
    #: and their framing: lines, marks, labels, headers), to compare with what was shown.
    charged: int = 0
    #: What the recovery strategy says of its choice for this call (``report[strategy.report_key]``).
    strategy_report: dict[str, Any] | None = None
    #: (characters, old units) of the text's leading record lines (:meth:`Assembler.records_prefix`).
    records: tuple[int, int] | None = None


def memory_wrapper_tokens(tokenizer: Tokenizer) -> int:
    """Tokens of the memory message around its lines: the tags, the introduction, and room
    for the line that says how many units are hidden."""
    return tokenizer.count(f"{MEMORY_OPEN}\n{MEMORY_INTRO}\n{MEMORY_CLOSE}") + 16


class Assembler:
    """Joins the timeline and recovered elements into the memory text, and counts it.

    Recovered text goes in place of its record, or after the item that shows its unit
    (a merged record), or, with ``detail_after``, after the whole timeline in time order.
    """

    def __init__(self, timeline: Timeline, tokenizer: Tokenizer, detail_after: bool = False) -> None:
        self.timeline = timeline
        self.tokenizer = tokenizer
        self.detail_after = detail_after

    def text(self, elements: Sequence[Element], tail: str | Segments = "") -> str:
        return "".join(text for text, _ in self.segments(elements, tail))

    def measure(self, elements: Sequence[Element], tail: str | Segments = "") -> tuple[str, int]:
        """The memory text and its exact count (stored counts of raw texts reused)."""
        segments = self.segments(elements, tail)
        return "".join(text for text, _ in segments), count_concat(self.tokenizer, segments)

    def records_prefix(self, elements: Sequence[Element]) -> tuple[int, int]:
        """(characters, old units) of the start of :meth:`text`: the opening, the introduction and
        the record lines up to the first recovered text, with the newline after the last; the
        units are those these lines show (hidden ones included)."""
        in_place: set[int] = set()
        after: set[int] = set()
        for e in elements:
            item = self.timeline.item_at(e.pos)
            (in_place if e.in_place else after).add(item.start if item is not None else -1)
        chars, units = len(MEMORY_OPEN) + len(MEMORY_INTRO) + 2, 0
        if self.timeline.hidden_until:
            chars, units = chars + len(self.timeline.hidden_line()) + 1, self.timeline.hidden_until
            if (-1 in after or -1 in in_place) and not self.detail_after:  # placed after the hidden line
                return chars, units
        for item in self.timeline.items:
            if item.start in in_place:
                break
            chars, units = chars + len(self.timeline.line_of(item)) + 1, item.end
            if item.start in after and not self.detail_after:
                break
        return chars, units

    def segments(self, elements: Sequence[Element], tail: str | Segments = "") -> list[tuple[str, int | None]]:
        """The memory text as lines joined by newlines, a recovered element's line in its parts."""
        by_item: dict[int, list[Element]] = {}
        for e in elements:
            item = self.timeline.item_at(e.pos)
            by_item.setdefault(item.start if item is not None else -1, []).append(e)
        for group in by_item.values():
            group.sort(key=lambda e: (e.pos, e.rank))
        lines: list[str | Element | Segments] = [MEMORY_OPEN, MEMORY_INTRO]
        later: list[Element] = []
        if self.timeline.hidden_until:
            lines.append(self.timeline.hidden_line())
            hidden = by_item.get(-1, [])  # recovered units whose records are hidden this call
            if self.detail_after:
                later.extend(hidden)
            else:
                lines.extend(hidden)
        for item in self.timeline.items:
            here = by_item.get(item.start, ())
            in_place = [e for e in here if e.in_place]
            if in_place:
                lines.extend(in_place)
            else:
                lines.append(self.timeline.line_of(item))
            after = [e for e in here if not e.in_place]
            if self.detail_after:
                later.extend(after)
            else:
                lines.extend(after)
        lines.extend(sorted(later, key=lambda e: (e.pos, e.rank)))
        if tail:
            lines.append(tail)
        lines.append(MEMORY_CLOSE)
        out: list[tuple[str, int | None]] = []
        for k, line in enumerate(lines):
            if k:
                out.append(("\n", None))
            if isinstance(line, Element):
                out.extend(line.segments())
            elif isinstance(line, tuple):
                out.extend(line)
            else:
                out.append((line, None))
        return out


def shrink(assembler: Assembler, elements: list[Element], allowance: int, tail_fn: Any = None
           ) -> tuple[str, int, list[Element]]:
    """Drop the lowest-ranked element while the memory exceeds the allowance."""
    elements = sorted(elements, key=lambda e: e.rank)
    while True:
        tail = tail_fn(elements) if tail_fn else ""
        text, n = assembler.measure(elements, tail)
        if n <= allowance or not elements:
            return text, n, elements
        elements = elements[:-1]
