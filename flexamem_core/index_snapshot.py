"""A saved copy of a namespace's search index, so that reopening a store is fast.

Building the index from the store means re-tokenising every piece for BM25 (seconds at
10,000 units). A store with the ``IndexSnapshots`` capability keeps one snapshot per
namespace: the BM25 postings in CSR form, the per-piece arrays (token counts, and the
piece vectors as one float32 matrix), and a digest of the unit keys it covers. It is
derived data, never the only copy: it covers a prefix of the notes in write order, is
checked against them on load (any other order, a deletion or a different format means it
is ignored and rebuilt), and the units written after it are indexed from their pieces as
before. Forgetting a unit deletes the snapshot with it.

The format is numpy's ``.npz`` (no pickle), versioned by ``FORMAT``.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from .schema import MergedRecord

#: 2: piece vectors (``piece_vectors``, one float32 row per piece document) and the
#: compact timeline lines (a record that opens with its label is not labelled twice).
FORMAT = 2


@runtime_checkable
class IndexSnapshots(Protocol):
    """Optional store capability: one opaque snapshot blob per namespace.

    ``delete_unit`` and ``delete_namespace`` must delete the namespace's snapshot, since
    it holds the terms of every unit it covers.
    """

    def get_index_snapshot(self, namespace: str) -> bytes | None: ...

    def put_index_snapshot(self, namespace: str, data: bytes) -> None: ...


@runtime_checkable
class MergedListing(Protocol):
    """Optional store capability: every memoised merged record of a namespace in one read,
    so a reopened timeline does not query the store once per merged group."""

    def merged_records(self, namespace: str) -> list[MergedRecord]: ...


@runtime_checkable
class NamespaceVersions(Protocol):
    """Optional store capability: a cheap token that changes whenever a namespace gains or
    loses a unit, so an instance notices another instance's writes and ``forget()``."""

    def namespace_version(self, namespace: str) -> str: ...


def keys_digest(keys: Sequence[str]) -> np.ndarray:
    """A digest of unit keys in order (what a snapshot covers)."""
    return np.frombuffer(hashlib.sha256("\n".join(keys).encode()).digest(), dtype=np.uint8)


def encode(arrays: dict[str, np.ndarray], keys: Sequence[str]) -> bytes:
    """The snapshot of an index covering the notes ``keys``, in write order."""
    buf = io.BytesIO()
    np.savez(buf, format=np.int64(FORMAT), covers=np.int64(len(keys)), keys=keys_digest(keys), **arrays)
    return buf.getvalue()


def decode(data: bytes, keys: Sequence[str]) -> dict[str, np.ndarray] | None:
    """The arrays of a snapshot if it covers a prefix of ``keys`` (the store's notes in
    write order) in this format; otherwise None (the caller rebuilds)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
    except (OSError, ValueError, KeyError, EOFError):
        return None
    covers = int(arrays.get("covers", -1))
    if int(arrays.get("format", -1)) != FORMAT or not 0 < covers <= len(keys):
        return None
    if not np.array_equal(arrays["keys"], keys_digest(keys[:covers])):
        return None
    return arrays
