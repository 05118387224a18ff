"""Evaluation tests never touch the user's embedding cache (``~/.cache/flexamem/embeddings``)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_cache_home(tmp_path_factory, monkeypatch):
    """Point ``XDG_CACHE_HOME`` at a temporary folder (worker processes inherit it)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache_home")))
