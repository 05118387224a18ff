"""A saved copy of a namespace's search index, so that reopening a store is fast.

Building the index from the store means re-tokenising every piece for BM25, slow for a
long history. A store with the ``IndexSnapshots`` capability keeps one snapshot per
namespace: the BM25 postings in CSR form, the per-piece arrays (token counts, and the
pieces' own vectors as one float32 matrix), and a digest of the unit keys it covers. It is
derived data, never the only copy: it covers a prefix of the notes in write order, is
checked against them on load (any other order, a deletion or a different format means it
is ignored and rebuilt), and the units written after it are indexed from their pieces.
Forgetting a unit deletes the snapshot with it.

The format is numpy's ``.npz`` (no pickle), versioned by ``FORMAT``.
"""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..model.schema import MergedRecord, Note

#: The format written. Formats 3 and 4 hold the pieces' own vectors (``piece_vectors``, with
#: ``own_docs``, the piece document of each row; a piece without one is scored by its note's
#: vector) and the counts of compact timeline lines (a record that opens with its label is
#: not labelled twice). Format 4 also holds the notes it covers (``note_vectors``,
#: ``note_data``), read from it by a store with the ``NotesFrom`` capability instead of a
#: row per note; a format 3 snapshot has none, so its notes are read from the store.
FORMAT = 4
_READ_FORMATS = (3, 4)


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
class NotesFrom(Protocol):
    """Optional store capability: in one read, the unit keys of a namespace's notes in write
    order and the notes from position ``start`` on. A reopen then takes the notes its
    snapshot covers from the snapshot, one value, instead of reading a row per note (rows
    spread through the file: slow with a cold page cache)."""

    def keys_and_notes_from(self, namespace: str, start: int) -> tuple[list[str], list[Note]]: ...


@runtime_checkable
class NamespaceVersions(Protocol):
    """Optional store capability: a cheap token that changes whenever a namespace gains or
    loses a unit, so an instance notices another instance's writes and ``forget()``."""

    def namespace_version(self, namespace: str) -> str: ...


def keys_digest(keys: Sequence[str]) -> np.ndarray:
    """A digest of unit keys in order (what a snapshot covers)."""
    return np.frombuffer(hashlib.sha256("\n".join(keys).encode()).digest(), dtype=np.uint8)


#: Every array starts at a multiple of this in the snapshot, so it is read in place with
#: the alignment BLAS needs (a misaligned float32 matrix multiplies far more slowly).
ALIGN = 64
#: The zip extra field that pads a member's local header (the id Android's zipalign uses).
_PAD_FIELD = 0xD935


def encode(arrays: dict[str, np.ndarray], keys: Sequence[str]) -> bytes:
    """The snapshot of an index covering the notes ``keys``, in write order: an ``.npz``
    as ``np.savez`` writes it (stored, not compressed), with each array aligned."""
    buf = io.BytesIO()
    members = {"format": np.int64(FORMAT), "covers": np.int64(len(keys)), "keys": keys_digest(keys), **arrays}
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, value in members.items():
            arr = np.asarray(value, order="C")
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            # zipfile refuses a member past ZIP64_LIMIT unless told first, and then adds its
            # 20-byte zip64 field to the header (room left for the .npy header itself)
            big = arr.nbytes + (1 << 16) > zipfile.ZIP64_LIMIT
            header = 30 + len(info.filename.encode()) + 4 + (20 if big else 0)
            pad = -(buf.tell() + header) % ALIGN
            info.extra = struct.pack("<HH", _PAD_FIELD, pad) + bytes(pad)
            with z.open(info, "w", force_zip64=big) as fh:
                np.lib.format.write_array(fh, arr, allow_pickle=False)  # pads its header to 64
    return buf.getvalue()


def _stored_arrays(data: bytes) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` written by :func:`encode`, as read-only views into ``data``
    (an array not aligned, as ``np.savez`` writes them, is copied).

    ``np.load`` copies each member out of the archive, twice over for the piece vectors,
    its largest member: ``np.savez`` stores members
    uncompressed, so each array is read in place from its offset, headers parsed by numpy.
    """
    view = memoryview(data)
    arrays: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
                raise ValueError(f"snapshot member {info.filename!r} is not a stored .npy")
            local = data[info.header_offset:info.header_offset + 30]
            if len(local) < 30 or local[:4] != b"PK\x03\x04":
                raise ValueError("snapshot member header is damaged")
            start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") \
                + int.from_bytes(local[28:30], "little")
            member = io.BytesIO(view[start:start + min(info.file_size, 1 << 16)])  # the header
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}.get(np.lib.format.read_magic(member))
            if read_header is None:
                raise ValueError("snapshot member has an unknown .npy version")
            shape, fortran, dtype = read_header(member)
            if dtype.hasobject or fortran:
                raise ValueError("snapshot arrays are plain C-ordered numbers")
            count = int(np.prod(shape, dtype=np.int64))
            if member.tell() + count * dtype.itemsize > info.file_size:
                raise ValueError("snapshot member is truncated")
            arr = np.frombuffer(view, dtype=dtype, count=count, offset=start + member.tell()).reshape(shape)
            arrays[info.filename[:-4]] = arr if arr.flags.aligned else arr.copy()  # as np.savez lays it out
    return arrays


def read(data: bytes) -> dict[str, np.ndarray] | None:
    """The arrays of a snapshot in a format this version reads, not yet checked against the
    store's notes (see :func:`covers_prefix`); None if it is damaged or of another format.
    The arrays are read-only views into ``data``: copy what is kept."""
    try:
        arrays = _stored_arrays(data)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if int(arrays.get("format", -1)) not in _READ_FORMATS or int(arrays.get("covers", -1)) <= 0 \
            or "keys" not in arrays:
        return None
    return arrays


def covers_prefix(arrays: dict[str, np.ndarray], keys: Sequence[str]) -> bool:
    """Whether the snapshot covers a prefix of ``keys`` (the store's notes in write order)."""
    covers = int(arrays["covers"])
    return covers <= len(keys) and np.array_equal(arrays["keys"], keys_digest(keys[:covers]))


def decode(data: bytes, keys: Sequence[str]) -> dict[str, np.ndarray] | None:
    """The arrays of a snapshot if it covers a prefix of ``keys`` (the store's notes in
    write order) in a format this version reads; otherwise None (the caller rebuilds)."""
    arrays = read(data)
    return arrays if arrays is not None and covers_prefix(arrays, keys) else None
