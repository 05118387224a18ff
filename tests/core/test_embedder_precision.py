"""The default embedder's precision: float32 is sentence-transformers' own output, bfloat16
(autocast, chosen by ``auto`` where the CPU has native bfloat16) stays within 1e-4 cosine
of it with unit-norm vectors, and a bad setting is refused before any model loads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flexamem_core.index.embeddings import PRECISIONS, SentenceTransformerEmbedder, native_bfloat16

TEXTS = [
    "ls -la /repo/src && cat setup.cfg",
    "The user adopted a dog named Biscuit in May and walks her every morning before work.",
    "Traceback (most recent call last):\n  File \"django/db/models/query.py\", line 1583, in _fetch_all\n"
    "    self._result_cache = list(self._iterable_class(self))\nKeyError: 'tenant_id'",
    "x",
]


@pytest.fixture(scope="module")
def float32_embedder():
    return SentenceTransformerEmbedder(precision="float32")


@pytest.fixture(scope="module")
def float32_vectors(float32_embedder):
    return float32_embedder.embed(TEXTS)


def test_float32_is_the_models_own_output(float32_embedder, float32_vectors):
    model = float32_embedder._load()
    direct = model.encode(TEXTS, batch_size=8, normalize_embeddings=True, show_progress_bar=False)
    np.testing.assert_allclose(float32_vectors, direct, atol=1e-6)
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_bfloat16_vectors_stay_within_a_cosine_of_1e4_with_unit_norm(float32_vectors):
    bf16 = SentenceTransformerEmbedder(precision="bfloat16")
    vecs = bf16.embed(TEXTS)
    linear = [m for m in bf16._load().modules() if isinstance(m, torch.nn.Linear)]
    assert linear and all(m.weight.dtype == torch.bfloat16 for m in linear), "Linear weights cast once, at load"
    assert vecs.dtype == np.float32 and vecs.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    cosines = np.sum(vecs * float32_vectors, axis=1)
    assert cosines.min() > 0.9999, cosines
    assert not np.array_equal(vecs, float32_vectors), "autocast ran in bfloat16"


def test_auto_follows_the_cpu_and_bad_settings_are_refused():
    auto = SentenceTransformerEmbedder()
    assert auto.precision == ("bfloat16" if native_bfloat16() else "float32")
    assert SentenceTransformerEmbedder(precision="float32").precision == "float32"
    assert set(PRECISIONS) == {"auto", "float32", "bfloat16"}
    for bad in ("fp16", "", "BFLOAT16"):
        with pytest.raises(ValueError, match="precision must be one of"):
            SentenceTransformerEmbedder(precision=bad)
    assert auto._model is None, "choosing a precision loads no model"


def test_the_default_embedders_precision_can_be_set_from_the_environment(monkeypatch):
    from flexamem_core.index.embeddings import PRECISION_ENV, default_precision

    for value, expected in (("float32", "float32"), (" bfloat16 ", "bfloat16"), ("", "auto")):
        monkeypatch.setenv(PRECISION_ENV, value)
        assert default_precision() == expected
    monkeypatch.delenv(PRECISION_ENV)
    assert default_precision() == "auto"
    monkeypatch.setenv(PRECISION_ENV, "half")
    with pytest.raises(ValueError, match="FLEXAMEM_EMBED_PRECISION must be one of"):
        default_precision()
