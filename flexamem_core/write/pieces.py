"""Pieces: verbatim slices of a unit cut at line breaks, at most kappa tokens each.

A piece never crosses a turn or an output block (it is cut inside one block), and a
single line longer than kappa is cut by tokens. Pieces are cut once, when the unit is
written, and stored with their token counts so no later call re-tokenizes them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model.protocols import Tokenizer
from ..model.schema import Piece
from .units import Block


def _lines_of(text: str, tokenizer: Tokenizer, kappa: int) -> list[tuple[str, int, str]]:
    """(text, tokens, joiner) segments: lines, and the parts of a line over kappa. The joiner
    is what precedes a segment in the text: a newline before a line, nothing inside one."""
    out: list[tuple[str, int, str]] = []
    for line in text.split("\n"):
        n = tokenizer.count(line)
        if n <= kappa:
            out.append((line, n, "\n"))
        else:
            out.extend((part, tokenizer.count(part), "\n" if k == 0 else "")
                       for k, part in enumerate(tokenizer.split(line, kappa)))
    return out


def cut_block(text: str, tokenizer: Tokenizer, kappa: int) -> list[tuple[str, int]]:
    """Greedy line packing of one block into (text, tokens) parts of at most ``kappa``.

    Every part is a slice of ``text``: segments are joined by exactly what separated them."""
    parts: list[tuple[str, int]] = []
    cur: list[tuple[str, str]] = []
    est = 0
    for line, n, joiner in _lines_of(text, tokenizer, kappa):
        sep = len(joiner) if cur else 0
        if cur and est + sep + n > kappa:
            parts.append(_finish(cur, tokenizer, kappa, parts))
            cur, est, sep = [], 0, 0
        est += sep + n
        cur.append((line, joiner))
    if cur:
        parts.append(_finish(cur, tokenizer, kappa, parts))
    return [p for p in parts if p[0].strip()]


def _join(segments: list[tuple[str, str]]) -> str:
    return segments[0][0] + "".join(joiner + text for text, joiner in segments[1:])


def _finish(segments: list[tuple[str, str]], tokenizer: Tokenizer, kappa: int,
            parts: list[tuple[str, int]]) -> tuple[str, int]:
    """Join segments; if the exact count is over kappa, emit leading segments separately."""
    while len(segments) > 1:
        text = _join(segments)
        n = tokenizer.count(text)
        if n <= kappa:
            return text, n
        first = segments.pop(0)[0]
        parts.append((first, tokenizer.count(first)))
    text = segments[0][0]
    return text, tokenizer.count(text)


def cut_pieces(unit_key: str, blocks: Sequence[Block], tokenizer: Tokenizer, kappa: int) -> list[Piece]:
    """All pieces of a unit, in order, each labelled for display out of context."""
    pieces: list[Piece] = []
    for b_idx, block in enumerate(blocks):
        for i, (text, n) in enumerate(cut_block(block.text, tokenizer, kappa)):
            pieces.append(Piece(unit_key=unit_key, index=len(pieces), text=text, tokens=n,
                                block=b_idx, starts_block=(i == 0), label=block.label))
    return pieces
