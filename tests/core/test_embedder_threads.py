"""The embedder's torch threads: a small input (a query, one unit's notes and pieces) runs on
one thread by default, a large one (a catch-up) on torch's own count, ``threads=`` fixes the
count; torch's count is put back after every call, the vectors are the model's whatever the
count, and bad settings are refused before any model loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flexamem_core.index.embeddings import SMALL_INPUT, THREADS_ENV, SentenceTransformerEmbedder, default_threads


def _threads_seen(embedder: SentenceTransformerEmbedder, texts: list[str]) -> set[int]:
    """torch's thread count inside the model's forward passes while ``texts`` are embedded."""
    seen: set[int] = set()
    handle = embedder._load()[0].register_forward_hook(lambda *_: seen.add(torch.get_num_threads()))
    try:
        embedder.embed(texts)
    finally:
        handle.remove()
    return seen


@pytest.fixture
def many_threads():
    """torch on two threads for the test (the count a two-core machine starts with), put back after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


def test_small_inputs_run_on_one_thread_large_ones_on_torchs_count(many_threads):
    e = SentenceTransformerEmbedder(precision="float32")
    assert _threads_seen(e, ["what did the agent run first?"]) == {1}
    assert _threads_seen(e, [f"note {i} of a unit" for i in range(SMALL_INPUT)]) == {1}
    assert _threads_seen(e, [f"catch-up text {i}" for i in range(SMALL_INPUT + 1)]) == {many_threads}
    assert torch.get_num_threads() == many_threads, "torch's count is put back after each call"


def test_a_fixed_count_is_used_for_every_input_and_the_vectors_do_not_depend_on_it(many_threads):
    texts = ["ls -la /repo/src && cat setup.cfg", "KeyError: 'tenant_id' in django/db/models/query.py"]
    one = SentenceTransformerEmbedder(precision="float32", threads=1)
    two = SentenceTransformerEmbedder(precision="float32", threads=2)
    assert _threads_seen(two, texts) == {2}
    assert _threads_seen(one, [f"catch-up text {i}" for i in range(SMALL_INPUT + 5)]) == {1}
    np.testing.assert_allclose(one.embed(texts), two.embed(texts), atol=1e-6)
    assert torch.get_num_threads() == many_threads


def test_bad_thread_settings_are_refused_before_any_model_loads(monkeypatch):
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="threads must be a positive integer"):
            SentenceTransformerEmbedder(threads=bad)  # type: ignore[arg-type]
    e = SentenceTransformerEmbedder(threads=3)
    assert e.threads_for(1) == 3 and e.threads_for(10_000) == 3 and e._model is None
    auto = SentenceTransformerEmbedder()
    assert auto.threads_for(1) == 1 and auto.threads_for(SMALL_INPUT + 1) is None
    for value, expected in (("4", 4), (" 1 ", 1), ("", None)):
        monkeypatch.setenv(THREADS_ENV, value)
        assert default_threads() == expected
    for bad in ("0", "two", "-2", "1.5"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(ValueError, match="FLEXAMEM_EMBED_THREADS must be a positive integer"):
            default_threads()
