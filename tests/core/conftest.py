"""Fixtures shared by the core tests."""

from __future__ import annotations

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig


@pytest.fixture
def mem(tokenizer, hashing_embedder):
    """A factory of memories with small agent units (so short histories span many units)."""
    def make(**settings) -> FlexAMem:
        return FlexAMem(FlexAMemConfig(**{"agent_unit_tokens": 100, **settings}), tokenizer=tokenizer,
                        embedder=hashing_embedder)
    return make
