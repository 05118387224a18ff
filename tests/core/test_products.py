"""The render's vector products run on the calling thread (``products.row_dots``), and one
render makes the note product once. Real data: random float32 matrices, the agent bench
history with the model-free embedder."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.index.products import row_dots
from flexamem_core.recall.candidates import candidates
from flexamem_core.request.tokens import TiktokenTokenizer
from flexamem_tools.bench import synthetic_history


@pytest.mark.parametrize("rows", [0, 1, 7, 1333, 13_333])
def test_row_dots_is_the_matrix_vector_product(rows):
    rng = np.random.default_rng(rows)
    matrix = rng.standard_normal((rows, 384)).astype(np.float32)
    vec = rng.standard_normal(384).astype(np.float32)
    got = row_dots(matrix, vec)
    assert got.shape == (rows,) and got.dtype == np.float32
    np.testing.assert_allclose(got, matrix.astype(np.float64) @ vec.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_row_dots_does_not_depend_on_blas_threads():
    """The same bits whatever the BLAS thread count (``matrix @ vec`` splits its rows over the
    pool and its last bits move with the split)."""
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((13_333, 384)).astype(np.float32)
    vec = rng.standard_normal(384).astype(np.float32)
    with threadpool_limits(1, user_api="blas"):
        one = row_dots(matrix, vec)
    with threadpool_limits(2, user_api="blas"):
        two = row_dots(matrix, vec)
    np.testing.assert_array_equal(one, two)


def test_row_dots_refuses_what_is_not_a_matrix_and_a_vector():
    with pytest.raises(ValueError, match="matrix and a vector"):
        row_dots(np.zeros((3, 4), dtype=np.float32), np.zeros((2, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="matrix and a vector"):
        row_dots(np.zeros(4, dtype=np.float32), np.zeros(4, dtype=np.float32))


def test_a_render_makes_the_note_product_once_and_a_new_note_gets_a_fresh_one(hashing_embedder, tokenizer):
    mem = FlexAMem(FlexAMemConfig(budget=3000, cache_stable=False), tokenizer=tokenizer, embedder=hashing_embedder)
    history = synthetic_history(40)
    mem.render(history[:200], namespace="t")
    index = mem.state("t").index
    q = hashing_embedder.embed(["grep config src/pkg_3/mod_3.py"])[0]
    cos = index.note_cosines(q)
    assert index.note_cosines(q) is cos and not cos.flags.writeable
    np.testing.assert_allclose(cos, index.vectors @ q, rtol=1e-5, atol=1e-6)
    # the seeds read that product: their scores are its values for the old notes
    notes = index.notes[:-1]
    cands = candidates(q, notes, index, mem.config.tuned(fused_seeds=False), "config")
    seeds = [c for c in cands if c.why == "seed"]
    assert seeds and all(c.score == float(cos[c.pos]) for c in seeds)
    assert index.note_cosines(q) is cos
    mem.render(history[:260], namespace="t")  # more units written: the product covers them
    grown = index.note_cosines(q)
    assert len(grown) > len(cos)
    np.testing.assert_array_equal(grown[: len(cos)], cos)


def test_the_token_memo_drops_its_oldest_quarter_when_full():
    tk = TiktokenTokenizer(cache_size=8)
    texts = [f"text number {i}" for i in range(9)]
    counts = [tk.count(t) for t in texts]
    assert len(tk._cache) == 7, "two of eight made room for the ninth, not a clear-all"
    assert texts[0] not in tk._cache and texts[1] not in tk._cache
    assert all(t in tk._cache for t in texts[2:])
    assert [tk.count(t) for t in texts] == counts == [len(tk.encoding.encode_ordinary(t)) for t in texts]
