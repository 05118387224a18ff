"""An append-only numpy buffer: amortised O(1) appends, a view of the filled part.

numpy has no growable array, and ``np.asarray(list)`` on every read would copy a whole
index per call; this keeps per-document data of an index readable as one array while it
grows by a few documents a call.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


class GrowableArray:
    """A 1-d numpy array that grows by appending (capacity doubles)."""

    __slots__ = ("_data", "_n")

    def __init__(self, dtype: type | np.dtype = np.int64, capacity: int = 16) -> None:
        self._data = np.zeros(max(1, capacity), dtype=dtype)
        self._n = 0

    @classmethod
    def of(cls, values: np.ndarray, dtype: type | np.dtype) -> GrowableArray:
        """A buffer holding a copy of ``values`` (room to grow by half again)."""
        out = cls(dtype, len(values) + len(values) // 2 + 4)
        out._data[: len(values)] = values
        out._n = len(values)
        return out

    def __len__(self) -> int:
        return self._n

    def _reserve(self, n: int) -> None:
        if n > len(self._data):
            grown = np.zeros(max(n, 2 * len(self._data)), dtype=self._data.dtype)
            grown[: self._n] = self._data[: self._n]
            self._data = grown

    def append(self, value: float) -> None:
        self._reserve(self._n + 1)
        self._data[self._n] = value
        self._n += 1

    def extend(self, values: Iterable[float]) -> None:
        arr = np.fromiter(values, dtype=self._data.dtype)
        self._reserve(self._n + len(arr))
        self._data[self._n:self._n + len(arr)] = arr
        self._n += len(arr)

    @property
    def view(self) -> np.ndarray:
        """The filled part (a view: valid until the next append)."""
        return self._data[: self._n]


def take_ascending(values: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """``values[docs]`` (read it, do not write it) for ascending distinct ``docs``: a view
    when they are ``0 .. n-1``, as the old units' pieces usually are (the first documents
    written), instead of a gather of every old piece."""
    n = len(docs)
    if n and docs[0] == 0 and docs[-1] == n - 1:
        return values[:n]
    return values[docs]
