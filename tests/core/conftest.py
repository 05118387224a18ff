"""Fixtures shared by the core tests."""

from __future__ import annotations

import pytest

from flexamem_core import FlexAMem
from tests.conftest import flat_config


@pytest.fixture
def mem(tokenizer, hashing_embedder):
    """A factory of memories with small agent units (so short histories span many units)."""
    def make(**settings) -> FlexAMem:
        return FlexAMem(flat_config(**{"agent_unit_tokens": 100, **settings}), tokenizer=tokenizer,
                        embedder=hashing_embedder)
    return make


@pytest.fixture(scope="session")
def shared():
    """The real model in float32, loaded once: the embedder the recording tests build on."""
    from flexamem_core.index.embeddings import SentenceTransformerEmbedder

    e = SentenceTransformerEmbedder(precision="float32")
    e.load()
    return e
