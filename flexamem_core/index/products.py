"""Row-by-vector products on the calling thread, never on BLAS's thread pool.

A render multiplies the note (and piece) vectors by one query vector: a small matrix-vector
product. numpy hands ``matrix @ vec`` to OpenBLAS, which splits even such a small product
across its threads and leaves its workers spinning after it: on a few cores they take CPU
time from the render, and with the other cores busy the render waits on its helper
threads. Limiting the pool would change a setting of the host's process; a row-wise dot
product (one short ``sdot`` per row, never threaded) needs no setting, and its result does
not depend on the host's thread count either.
"""

from __future__ import annotations

import numpy as np

_vecdot = getattr(np, "vecdot", None)  # numpy >= 2.0


def row_dots(matrix: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """``matrix @ vec`` for a 2-d ``matrix`` and a 1-d ``vec``, computed row by row on this thread."""
    if vec.ndim != 1 or matrix.ndim != 2:
        raise ValueError(f"row_dots takes a matrix and a vector, not shapes {matrix.shape} and {vec.shape}")
    if len(matrix) == 0:
        return np.zeros(0, dtype=np.result_type(matrix, vec))
    if _vecdot is not None:
        return _vecdot(matrix, vec)
    return np.einsum("ij,j->i", matrix, vec)
