"""``fusion.ranks`` sorts unique 64-bit keys instead of running numpy's stable sort: checked
against the definition (a stable argsort of the negated values) on values full of ties."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from flexamem_core.fusion import ranks

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -1e-45]


def _definition(values: np.ndarray) -> np.ndarray:
    order = np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")
    out = np.empty(len(order), dtype=np.float64)
    out[order] = np.arange(1, len(order) + 1, dtype=np.float64)
    return out


@settings(max_examples=300, deadline=None)
@given(arrays(st.sampled_from([np.float32, np.float64]), st.integers(0, 300),
              elements=st.one_of(st.sampled_from(SPECIAL), st.floats(-10, 10, width=32))))
def test_ranks_are_the_stable_order_of_the_values(values):
    np.testing.assert_array_equal(ranks(values), _definition(values))


@given(arrays(np.float64, st.integers(1, 50), elements=st.one_of(st.just(np.nan), st.floats(-5, 5))))
def test_ranks_with_nan_keep_the_definition(values):
    np.testing.assert_array_equal(ranks(values), _definition(values))


def test_ranks_of_many_cosines_with_ties():
    rng = np.random.default_rng(3)
    cos = rng.standard_normal(200_000).astype(np.float32)
    cos[::5] = cos[1]  # a fifth tied
    np.testing.assert_array_equal(ranks(cos), _definition(cos))
    np.testing.assert_array_equal(ranks(cos.astype(np.float64) * 7), _definition(cos.astype(np.float64) * 7))
