"""The piece walk (:func:`flexamem_core.recovery.select_pieces`) against its definition: every
candidate in rank order (equal scores a run, by cosine when the run does not fit whole, else
by position), each taken if it fits what is left. The walk sorts only the best candidates
and passes over in C those that cannot fit; it must choose exactly what the definition does."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from flexamem_core.recovery import select_pieces


def definition(hits, scores, tokens, room, cos) -> list[int]:
    order = sorted((int(d) for d in hits), key=lambda d: (-scores[d], d))
    chosen, i = [], 0
    while i < len(order):
        j = i
        while j < len(order) and scores[order[j]] == scores[order[i]]:
            j += 1
        run = order[i:j]
        if len(run) > 1 and sum(int(tokens[d]) for d in run) > room:
            run = sorted(run, key=lambda d: (-cos[d], d))
        for d in run:
            if int(tokens[d]) <= room:
                chosen.append(d)
                room -= int(tokens[d])
        i = j
    return chosen


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 400), st.integers(0, 3000), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_the_walk_chooses_what_the_definition_chooses(n, room, levels, seed):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random(n + 3) * levels, 1)  # few distinct values: long runs of ties
    tokens = rng.integers(1, 160, n + 3)
    hits = np.sort(rng.choice(n + 3, size=n, replace=False))
    cos = rng.random(n + 3)
    got = select_pieces(hits, scores, tokens, room, lambda run: cos[np.asarray(run)])
    assert got == definition(hits, scores, tokens, room, cos)


def test_a_nearly_full_room_passes_over_what_cannot_fit():
    """100,000 candidates of 50 tokens and a few small ones at the end of the ranking: with
    30 tokens left only the small ones fit, and they are found."""
    n = 100_000
    scores = np.linspace(1.0, 0.1, n)
    tokens = np.full(n, 50)
    tokens[-3:] = [10, 25, 8]
    got = select_pieces(np.arange(n), scores, tokens, 30, lambda run: np.zeros(len(run)))
    assert got == [n - 3, n - 1]
