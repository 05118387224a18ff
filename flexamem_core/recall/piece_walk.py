"""The walk that chooses pieces: best-ranked first, each priced with its framing (marks,
labels, headers) and taken while it fits the room."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..index.fusion import Ranking
from ..index.namespace import NamespaceIndex
from ..model.protocols import Tokenizer
from ..model.schema import Note, Piece
from .joins import PIECES_HEADER, group_header


class Framing:
    """What a chosen piece costs beyond its own tokens, counted before choosing it: the
    newline that joins it (or the '...' line before a run that does not open its unit: one
    token with its newlines), and where it starts a run inside a turn or block, its label;
    for the first piece of a unit, the '...' after its unit's text and, if no unit with its
    label is shown yet, its group header; for the first piece of all, the pieces header.

    An upper bound in practice: a later piece that joins two runs saves a mark and a label
    it is not refunded (the exact count after choosing gives that room to the next pieces)."""

    def __init__(self, index: NamespaceIndex, notes: Sequence[Note], pos_of: Mapping[str, int],
                 tokenizer: Tokenizer, pieces_of: Callable[[str], list[Piece]] | None = None) -> None:
        self.index, self.notes, self.pos_of, self.tokenizer = index, notes, pos_of, tokenizer
        self.pieces_of = pieces_of
        self.taken: set[int] = set()
        self.units: set[str] = set()
        self.labels: set[str] = set()
        self.opening = tokenizer.count(PIECES_HEADER) + 1
        self._counts: dict[str, int] = {}
        #: What the pieces taken were charged in all (their tokens and framing).
        self.charged = 0

    def _count(self, text: str) -> int:
        if text not in self._counts:
            self._counts[text] = self.tokenizer.count(text)
        return self._counts[text]

    def cost(self, d: int) -> int:
        index = self.index
        unit = index.doc_unit[d]
        joined = d - 1 in self.taken and index.doc_unit[d - 1] == unit
        # The newline (or what separated it in the raw text) before it; for a run that does
        # not open its unit, the '...' line before it: '\n...\n' is one token.
        extra = 1
        if not joined:
            piece_no = index.doc_piece[d]
            if self.pieces_of is not None:
                piece = self.pieces_of(unit)[piece_no]
                if not piece.starts_block:
                    extra += self._count(f"[{piece.label}] ")
        if unit not in self.units:
            extra += 1  # the '...' line after its unit's text, if its end is left out
            label = self.notes[self.pos_of[unit]].label
            if label not in self.labels:
                extra += self._count(group_header(label)) + 1
        return extra + (self.opening if not self.taken else 0)

    def take(self, d: int, charged: int = 0) -> None:
        self.taken.add(d)
        self.charged += charged
        unit = self.index.doc_unit[d]
        self.units.add(unit)
        self.labels.add(self.notes[self.pos_of[unit]].label)


#: Pieces in a row that fit by their own size but not with their framing before the walk
#: of :func:`select_pieces` stops.
MAX_MISSES = 64


def select_pieces(ranking: Ranking, tokens: Sequence[int] | np.ndarray, room: int,
                  cosine: Callable[[list[int]], np.ndarray], framing: Framing | None = None) -> list[int]:
    """Pieces in ``ranking``'s order (BM25 or fused), taken greedily while they fit ``room``
    (with ``framing``: what each costs to show, marks and headers included, so the memory
    seldom has to drop one).

    Ties go to ``cosine`` with the query (stored vectors, no model call), then to the
    earlier piece; only a run of equal scores that does not fit whole needs that order (a
    run taken whole is shown in time order anyway). The walk stops as soon as the room
    left is smaller than every piece, or when ``MAX_MISSES`` pieces in a row small enough
    to fit did not fit with their framing: the room left is then less than a new run's
    label and header cost, and pricing every remaining candidate would cost the whole
    ranking (with RRF every old piece is a candidate).
    """
    chosen: list[int] = []
    if len(ranking) == 0 or room <= 0:
        return chosen
    # Only the best pieces can fit: sort the top ones (all pieces tied with the last of
    # them included), and widen only if the room is not used up by them.
    tokens_of = np.asarray(tokens)
    smallest = max(1, ranking.smallest(tokens_of))
    # Every piece shown costs at least its tokens and the newline before it: a piece that
    # cannot fit even so is passed over without pricing its marks.
    least = 1 if framing is not None else 0
    order = ranking.best(4 * (room // smallest + 1))
    runs = _Runs(order, ranking.score(order), tokens_of)
    i = misses = 0
    while room >= smallest + least and misses < MAX_MISSES:
        # the next run of equal scores holding a piece that could fit (found in C: once the
        # room is nearly used, most candidates are passed over here, none of them priced)
        nxt = runs.next_fitting(i, room - least)
        if nxt is None:
            if len(order) >= len(ranking):
                break
            # ties at the cut are all included, so the longer order starts with this one and
            # its runs: go on after it (no piece of it could fit the room there is now)
            i = len(order)
            order = ranking.best(8 * len(order))
            runs = _Runs(order, ranking.score(order), tokens_of)
            continue
        i, j = nxt
        run = order[i:j].tolist()
        if len(run) > 1 and int(tokens_of[order[i:j]].sum()) > room:
            cos = cosine(run)
            run = [d for _, d in sorted(zip((-cos).tolist(), run))]
        room, misses = _take_run(run, tokens_of, room, least, misses, framing, chosen)
        i = j
    return chosen


def _take_run(run: list[int], tokens_of: np.ndarray, room: int, least: int, misses: int,
              framing: Framing | None, chosen: list[int]) -> tuple[int, int]:
    """Take the pieces of one run of equal scores that fit, in order; returns the room left
    and the misses in a row (pieces that fit by their size but not with their framing)."""
    for d in run:
        size = int(tokens_of[d])
        if size + least > room:
            continue
        cost = size + (framing.cost(d) if framing is not None else 0)
        if cost > room:
            misses += 1
            if misses >= MAX_MISSES:
                break
            continue
        misses = 0
        chosen.append(d)
        room -= cost
        if framing is not None:
            framing.take(d, cost)
    return room, misses


class _Runs:
    """The runs of equal scores of a best-first order, with the smallest piece of each."""

    def __init__(self, order: np.ndarray, values: np.ndarray, tokens: np.ndarray) -> None:
        """``values``: the scores of ``order``, in its order."""
        arr = np.asarray(order, dtype=np.int64)
        self.n = len(arr)
        if self.n == 0:
            self.starts = self.stops = self.smallest = np.zeros(0, dtype=np.int64)
            return
        self.starts = np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1)).astype(np.int64)
        self.stops = np.append(self.starts[1:], self.n)
        self.smallest = np.minimum.reduceat(tokens[arr], self.starts)

    def next_fitting(self, i: int, fits: int) -> tuple[int, int] | None:
        """The first run starting at ``i`` or later whose smallest piece is at most ``fits``
        tokens, as (start, stop); None if there is none in this order."""
        r = int(np.searchsorted(self.starts, i))
        ok = np.flatnonzero(self.smallest[r:] <= fits)
        if len(ok) == 0:
            return None
        r += int(ok[0])
        return int(self.starts[r]), int(self.stops[r])
