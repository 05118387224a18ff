"""The piece walk (:func:`flexamem_core.recall.piece_walk.select_pieces`) against its definition: every
candidate in rank order (equal scores a run, by cosine when the run does not fit whole, else
by position), each taken if it fits what is left. The walk sorts only the best candidates
and passes over in C those that cannot fit; it must choose exactly what the definition does."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from flexamem_core.index.fusion import DenseRanking, without
from flexamem_core.recall.piece_walk import MAX_MISSES, select_pieces


def definition(hits, scores, tokens, room, cos, extra=None) -> list[int]:
    """Every candidate in rank order, taken if it fits what is left. With ``extra`` (a
    :class:`Framing`'s extras), priced with its framing when its own size and a newline fit,
    and the walk ends once ``MAX_MISSES`` priced candidates in a row did not fit."""
    order = sorted((int(d) for d in hits), key=lambda d: (-scores[d], d))
    framing = Framing(extra) if extra is not None else None
    least = 1 if framing is not None else 0
    chosen, misses, i = [], 0, 0
    while i < len(order) and misses < MAX_MISSES:
        j = i
        while j < len(order) and scores[order[j]] == scores[order[i]]:
            j += 1
        run = order[i:j]
        if len(run) > 1 and sum(int(tokens[d]) for d in run) > room:
            run = sorted(run, key=lambda d: (-cos[d], d))
        for d in run:
            if int(tokens[d]) + least > room:
                continue
            cost = int(tokens[d]) + (framing.cost(d) if framing is not None else 0)
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
        i = j
    return chosen


class Framing:
    """A framing by the walk's protocol (``cost``, ``take``): a fixed extra per piece, less
    for a piece that continues the one before it."""

    def __init__(self, extra: np.ndarray) -> None:
        self.extra, self.taken = extra, set()

    def cost(self, d: int) -> int:
        return 1 if d - 1 in self.taken else int(self.extra[d])

    def take(self, d: int, charged: int = 0) -> None:
        self.taken.add(d)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 400), st.integers(0, 3000), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_the_walk_chooses_what_the_definition_chooses(n, room, levels, seed):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random(n + 3) * levels, 1)  # few distinct values: long runs of ties
    tokens = rng.integers(1, 160, n + 3)
    hits = np.sort(rng.choice(n + 3, size=n, replace=False))
    cos = rng.random(n + 3)
    got = select_pieces(DenseRanking(hits, scores), tokens, room, lambda run: cos[np.asarray(run)])
    assert got == definition(hits, scores, tokens, room, cos)


def test_a_nearly_full_room_passes_over_what_cannot_fit():
    """100,000 candidates of 50 tokens and a few small ones at the end of the ranking: with
    30 tokens left only the small ones fit, and they are found."""
    n = 100_000
    scores = np.linspace(1.0, 0.1, n)
    tokens = np.full(n, 50)
    tokens[-3:] = [10, 25, 8]
    got = select_pieces(DenseRanking(np.arange(n), scores), tokens, 30, lambda run: np.zeros(len(run)))
    assert got == [n - 3, n - 1]



@settings(max_examples=300, deadline=None)
@given(st.integers(1, 600), st.integers(0, 3000), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_the_framed_walk_stops_after_a_run_of_misses(n, room, levels, seed):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random(n + 3) * levels, 1)
    tokens = rng.integers(1, 60, n + 3)
    extra = rng.integers(1, 80, n + 3)  # often more than the room left: misses
    hits = np.sort(rng.choice(n + 3, size=n, replace=False))
    cos = rng.random(n + 3)
    got = select_pieces(DenseRanking(hits, scores), tokens, room, lambda run: cos[np.asarray(run)], Framing(extra))
    assert got == definition(hits, scores, tokens, room, cos, extra)


def test_a_nearly_full_room_stops_pricing_pieces_whose_framing_cannot_fit():
    """100,000 candidates that fit by size but not with their framing: the walk prices
    ``MAX_MISSES`` of them, not all."""
    n = 100_000
    priced = []

    class Counting(Framing):
        def cost(self, d: int) -> int:  # no piece continues another here: each pays its framing
            priced.append(d)
            return int(self.extra[d])

    tokens = np.full(n, 10)
    tokens[:3] = 500  # the best three fill the room but 30 tokens
    got = select_pieces(DenseRanking(np.arange(n), np.linspace(1.0, 0.1, n)), tokens, 3 * 540 + 30,
                        lambda run: np.zeros(len(run)), Counting(np.full(n, 40)))
    assert got == [0, 1, 2] and len(priced) == 3 + MAX_MISSES


@given(st.lists(st.integers(0, 300), unique=True), st.lists(st.integers(-5, 305), max_size=40))
def test_leaving_documents_out_keeps_the_rest_in_order(hits, some):
    hits = np.asarray(sorted(hits), dtype=np.int64)
    assert without(hits, some).tolist() == [d for d in hits.tolist() if d not in set(some)]
