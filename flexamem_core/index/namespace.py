"""Per-namespace search state: note vectors, links, BM25 over pieces, memoised merges.

Everything here is derived from the store and rebuilt on open without re-embedding
(embeddings live in the notes); it then grows incrementally as units are written, so
no render rescans the history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from ..model.protocols import Store
from ..model.schema import MergedRecord, Note, Piece
from ..stores import codec
from . import snapshot
from .arrays import GrowableArray
from .bm25 import BM25Index
from .fusion import ranks
from .products import row_dots
from .snapshot import IndexSnapshots, MergedListing, NotesFrom


def top_k(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, largest first, ties to the lower index.

    A partial selection (``np.partition``) finds the k-th value, so only the values at or
    above it are sorted: O(n), not O(n log n), as the index grows.
    """
    n = len(values)
    if k <= 0 or n == 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        kth = np.partition(values, n - k)[n - k]
        idx = np.flatnonzero(values >= kth)
    else:
        idx = np.arange(n)
    return idx[np.lexsort((idx, -values[idx]))][:k]


#: Merged records a namespace reads one by one before it lists them all (``get_merged``).
MERGED_POINT_READS = 64


@dataclass(frozen=True)
class NoteGroups:
    """Old piece documents ranked by their notes' cosines (agents: no piece has its own
    vector). ``docs`` ascend; the pieces of one note are the run ``starts[g] ..
    starts[g] + counts[g]`` of positions in ``docs``, ranked ``first[g]``, ``first[g] + 1``,
    ...; ``order`` lists the runs best first. So a piece's rank is known without ranking
    every piece, and the best pieces are the first runs of ``order``."""

    docs: np.ndarray
    starts: np.ndarray
    counts: np.ndarray
    first: np.ndarray
    order: np.ndarray
    #: The run of the piece at each position, where it is known without a search: ``docs``
    #: are the first documents and each of the first notes has pieces (run g is note g).
    run_at: np.ndarray | None = None

    def ranks_at(self, positions: np.ndarray) -> np.ndarray:
        """The cosine rank of the pieces at ``positions`` (into ``docs``)."""
        g = self.run_at[positions] if self.run_at is not None \
            else np.searchsorted(self.starts, positions, side="right") - 1
        return self.first[g] + (positions - self.starts[g])

    def best_positions(self, n: int) -> np.ndarray:
        """Positions of the ``n`` best-ranked pieces (fewer if there are fewer), best first."""
        take = int(np.searchsorted(np.cumsum(self.counts[self.order]), n)) + 1
        runs = self.order[:take]
        counts = self.counts[runs]
        at = np.repeat(self.starts[runs], counts) + (np.arange(int(counts.sum())) - np.repeat(
            np.cumsum(counts) - counts, counts))
        return at[:n]

def _same_docs(kept: int | np.ndarray, docs: np.ndarray, first_docs: bool) -> bool:
    """Whether ``docs`` are the documents kept with a ranking: the first ``kept`` documents
    (an int), or a copy of them."""
    if isinstance(kept, int):
        return bool(first_docs) and kept == len(docs)
    return not first_docs and np.array_equal(kept, docs)


class _Rows:
    """A float32 matrix that grows by rows: a read-only ``base`` (the piece vectors of a
    loaded snapshot, read in place from its bytes) and a tail grown by doubling.

    Copying the base on load would write fresh pages for all of it, so it is kept as it is
    and the two parts are multiplied apart; ``view`` (one matrix) joins them once, when
    something needs them whole (a snapshot being saved).
    """

    __slots__ = ("_base", "_data", "_n")

    def __init__(self, dim: int, capacity: int = 64) -> None:
        self._base = np.zeros((0, dim), dtype=np.float32)
        self._data = np.zeros((max(1, capacity), dim), dtype=np.float32)
        self._n = 0

    @classmethod
    def of(cls, rows: np.ndarray) -> _Rows:
        """Rows starting with ``rows``, which are kept, not copied (they must not change)."""
        out = cls(rows.shape[1])
        out._base = rows
        return out

    @property
    def dim(self) -> int:
        return int(self._data.shape[1])

    def __len__(self) -> int:
        return len(self._base) + self._n

    def extend(self, rows: np.ndarray) -> None:
        if len(rows) == 0:
            return
        if rows.shape[1] != self.dim:
            if len(self):
                raise ValueError(f"piece vector dimension {rows.shape[1]} != index dimension {self.dim}")
            self._base = np.zeros((0, rows.shape[1]), dtype=np.float32)
            self._data = np.zeros((max(64, 2 * len(rows)), rows.shape[1]), dtype=np.float32)
        need = self._n + len(rows)
        if need > len(self._data):
            grown = np.zeros((max(need, 2 * len(self._data)), self.dim), dtype=np.float32)
            grown[: self._n] = self._data[: self._n]
            self._data = grown
        self._data[self._n:need] = rows
        self._n = need

    def dot(self, vec: np.ndarray) -> np.ndarray:
        """Every row's product with ``vec``."""
        if not len(self._base):
            return row_dots(self._data[: self._n], vec)
        if not self._n:
            return row_dots(self._base, vec)
        return np.concatenate([row_dots(self._base, vec), row_dots(self._data[: self._n], vec)])

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The rows numbered ``rows``, in that order."""
        nb = len(self._base)
        if not nb:
            return self._data[rows]
        if not self._n:
            return self._base[rows]
        out = np.empty((len(rows), self.dim), dtype=np.float32)
        low = rows < nb
        out[low] = self._base[rows[low]]
        out[~low] = self._data[rows[~low] - nb]
        return out

    @property
    def view(self) -> np.ndarray:
        if len(self._base):
            grown = np.zeros((len(self) + len(self) // 2 + 64, self.dim), dtype=np.float32)
            grown[: len(self._base)] = self._base
            grown[len(self._base):len(self)] = self._data[: self._n]
            self._n = len(self)
            self._base, self._data = np.zeros((0, self.dim), dtype=np.float32), grown
        return self._data[: self._n]


class NamespaceIndex:
    """Vectors, link graph and BM25 postings for one namespace of a store.

    A piece document is scored by its own vector (stored with it when its unit was written)
    or, stored without one (``piece_vectors=False``, the agent default, or a store whose
    pieces carry none), by its note's vector. Only the own vectors are kept, as rows of one
    float32 matrix: a piece without one costs no row to hold, save or read back, and its
    cosine is its note's, from the product over the note vectors.

    A note may be indexed before its vector is made (a long catch-up's, embedded after the
    call: :mod:`flexamem_core.render.note_fill`): it is *pending*, its row is zeros and it
    has no links. Every read of the vectors or links first calls :attr:`fill_pending`, which
    makes them, so nothing is ever ranked by a missing vector.
    """

    def __init__(self, store: Store, namespace: str, k1: float = 1.2, b: float = 0.75,
                 dim: int = 384) -> None:
        self.store, self.namespace = store, namespace
        self.notes: list[Note] = []
        self.position: dict[str, int] = {}
        self._vectors, self._n = np.zeros((0, dim), dtype=np.float32), 0
        self.back_links: dict[str, set[str]] = {}
        self.bm25 = BM25Index(k1, b)
        self.doc_unit: list[str] = []
        self.doc_piece: list[int] = []
        self._doc_tokens = GrowableArray(np.int64)
        #: Position (in ``notes``) of the unit of every piece document.
        self._doc_note = GrowableArray(np.int64)
        #: The own vectors of the piece documents that have one, in document order.
        self._piece_vectors = _Rows(dim)
        #: The piece document of each of those rows.
        self._own_docs = GrowableArray(np.int64)
        self._last_cosines: tuple[np.ndarray, _Rows, int, np.ndarray] | None = None
        self._last_note_cosines: tuple[np.ndarray, np.ndarray, int, np.ndarray] | None = None
        #: The last ranking of documents by notes: (the note cosines it read, the documents:
        #: their count where they were the first documents, else a copy, ranks, groups).
        self._last_ranks: tuple[np.ndarray, int | np.ndarray, np.ndarray | None, NoteGroups | None] | None = None
        #: First document of each note's run of pieces (doc_note changes there), for the
        #: documents scanned so far: (the doc_note buffer scanned, how far, the starts).
        self._run_starts: tuple[GrowableArray, int, GrowableArray] | None = None
        self._doc_numbers = np.zeros(0, dtype=np.int64)
        self._last_note_ranks: tuple[np.ndarray, int, np.ndarray] | None = None
        self.unit_docs: dict[str, range] = {}
        self.merged: dict[str, MergedRecord] = {}
        self._merged_reads = 0  # merged records read one by one (``get_merged``)
        self._merged_listed = False
        self._merged_spans: tuple[str, dict[tuple[int, int, str], int]] | None = None
        #: Timeline items already built, keyed by (start, end, last unit key[, writer]).
        self.timeline_items: dict[tuple[Any, ...], Any] = {}
        #: Unaligned merged items already built, keyed by (writer, the keys they cover): by the
        #: items they merge, not by span (``timeline.merge_unaligned_items``).
        self.unaligned_items: dict[tuple[str, ...], Any] = {}
        #: Per-process render state derived from the notes (the incremental timeline).
        self.derived: dict[str, Any] = {}
        #: Notes covered by the snapshot last saved or loaded (``index_snapshot``).
        self.saved_covers = 0
        #: Notes whose record line is built in ``timeline_items`` (``timeline.count_record_lines``).
        self.records_counted = 0
        self._saved_lines: dict[tuple[int, int, str], int] = {}
        self._saved_lines_by = ""
        #: Positions of the pending notes (class docstring), and what makes their vectors.
        self.pending: list[int] = []
        self.fill_pending: Callable[[], None] | None = None
        self.load()

    def load(self) -> None:
        """Build from the store: notes (with their stored embeddings) and all pieces, or the
        saved snapshot of the index plus the units written after it."""
        arrays = self._snapshot()
        notes = self._notes_from_snapshot(arrays) if arrays is not None else None
        from_snapshot = notes is not None  # then the covered notes' embeddings are its rows
        if notes is None:
            notes = self.store.notes(self.namespace)
        covered = self._restore(notes, arrays, from_snapshot) if notes else 0
        if covered == 0:
            pieces_by_unit: dict[str, list[Piece]] = {}
            for p in self.store.iter_pieces(self.namespace):
                pieces_by_unit.setdefault(p.unit_key, []).append(p)
            for note in notes:
                self.add(note, pieces_by_unit.get(note.unit_key, []))
        else:
            for note in notes[covered:]:
                self.add(note, self.store.pieces(self.namespace, note.unit_key))

    def _snapshot(self) -> dict[str, np.ndarray] | None:
        """The store's snapshot of this index, read once, not yet checked against the notes."""
        if not isinstance(self.store, IndexSnapshots):
            return None
        data = self.store.get_index_snapshot(self.namespace)
        return snapshot.read(data) if data else None

    def _notes_from_snapshot(self, arrays: dict[str, np.ndarray]) -> list[Note] | None:
        """The namespace's notes, those the snapshot covers taken from it: a store with the
        ``NotesFrom`` capability reads only the keys and the notes written after it. None
        when that cannot be done (read every note instead)."""
        if not isinstance(self.store, NotesFrom) or "note_data" not in arrays or "note_vectors" not in arrays:
            return None
        covered = int(arrays["covers"])
        keys, rest = self.store.keys_and_notes_from(self.namespace, covered)
        if not snapshot.covers_prefix(arrays, keys) or len(rest) != len(keys) - covered:
            return None  # another order, a deletion or a write in between: read every note
        try:
            notes = codec.notes_from_blob(arrays["note_data"].tobytes(), arrays["note_vectors"])
        except ValueError:
            return None
        if [n.unit_key for n in notes] != keys[:covered]:
            return None
        return [*notes, *rest]

    def _restore(self, notes: Sequence[Note], arrays: dict[str, np.ndarray] | None,
                 from_snapshot: bool = False) -> int:
        """Load the snapshot ``arrays`` if it fits ``notes`` (``from_snapshot``: the notes it
        covers were read from it); returns the notes it covers."""
        if arrays is None or not snapshot.covers_prefix(arrays, [n.unit_key for n in notes]):
            return 0
        covered = int(arrays["covers"])
        counts = arrays["piece_counts"].astype(np.int64)
        n_docs = len(arrays["bm25_lengths"])
        own_docs = arrays["own_docs"].astype(np.int64) if "own_docs" in arrays else None
        if len(counts) != covered or int(counts.sum()) != n_docs or own_docs is None \
                or "piece_vectors" not in arrays or arrays["piece_vectors"].ndim != 2 \
                or len(arrays["piece_vectors"]) != len(own_docs) \
                or (len(own_docs) and (own_docs[0] < 0 or own_docs[-1] >= n_docs
                                       or bool((np.diff(own_docs) <= 0).any()))):
            return 0
        self._add_notes(notes[:covered], arrays["note_vectors"][:covered] if from_snapshot else None)
        self.bm25 = BM25Index.restore(arrays, self.bm25.k1, self.bm25.b)
        starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
        for note, a, b in zip(notes, starts, starts[1:]):
            self.unit_docs[note.unit_key] = range(a, b)
            self.doc_unit.extend(repeat(note.unit_key, b - a))
        self.doc_piece = arrays["doc_piece"].tolist()
        self._doc_tokens = GrowableArray.of(arrays["doc_tokens"], np.int64)
        self._doc_note = GrowableArray.of(np.repeat(np.arange(covered), counts), np.int64)
        self._piece_vectors = _Rows.of(arrays["piece_vectors"].astype(np.float32, copy=False))
        self._own_docs = GrowableArray.of(own_docs, np.int64)
        self.saved_covers = covered
        if "line_tokenizer" not in arrays:
            return covered
        tokenizer, _, writers = arrays["line_tokenizer"].tobytes().decode().partition("\n")
        writer_names = writers.split("\n") if writers else []
        self._saved_lines_by = tokenizer
        self._saved_lines = {(int(a), int(b), writer_names[w] if w >= 0 else ""): int(t)
                             for a, b, w, t in zip(arrays["line_starts"].tolist(), arrays["line_ends"].tolist(),
                                                   arrays["line_writers"].tolist(), arrays["line_tokens"].tolist())
                             if b <= covered and (w < 0 or w < len(writer_names))}
        return covered

    def saved_lines(self, tokenizer: str) -> Mapping[tuple[int, int, str], int]:
        """The token counts of timeline lines saved with the snapshot, by (start, end, writer)
        as :meth:`saved_line_tokens` reads them, if counted by ``tokenizer`` (else none)."""
        return self._saved_lines if tokenizer == self._saved_lines_by else {}

    def saved_line_tokens(self, start: int, end: int, writer: str, tokenizer: str) -> int | None:
        """The token count of a timeline line saved with the snapshot (``writer`` is "" for a
        record, the merge writer's name for a merged line), if counted by this tokenizer: a
        reopened timeline would otherwise tokenize every line of the history again."""
        return self.saved_lines(tokenizer).get((start, end, writer))

    def _line_arrays(self, tokenizer: str) -> dict[str, np.ndarray]:
        """The timeline lines built or counted so far (records and merges) and their token counts."""
        writers: list[str] = []
        rows: list[tuple[int, int, int, int]] = []
        for key, item in self.timeline_items.items():
            start, end = key[0], key[1]
            if not (0 <= start < end <= len(self.notes)) or self.notes[end - 1].unit_key != key[2]:
                continue  # a line of another chain (a fork): not a prefix of the notes
            w = -1
            if len(key) > 3:
                if key[3] not in writers:
                    writers.append(key[3])
                w = writers.index(key[3])
            rows.append((start, end, w, item.tokens))
        # the lines the snapshot or the merged records counted and no call has built since (a
        # reopen builds only the lines it shows): still lines of the first notes, which never change
        counted = dict(self.saved_lines(tokenizer))
        if self._merged_spans is not None and self._merged_spans[0].rpartition("/")[0] == tokenizer:
            counted.update(self._merged_spans[1])
        if counted:
            built = {(a, b, writers[w] if w >= 0 else "") for a, b, w, _ in rows}
            for (start, end, writer), tokens in counted.items():
                if (start, end, writer) not in built:
                    if writer and writer not in writers:
                        writers.append(writer)
                    rows.append((start, end, writers.index(writer) if writer else -1, tokens))
        cols = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        return {"line_tokenizer": np.frombuffer("\n".join([tokenizer, *writers]).encode(), dtype=np.uint8),
                "line_starts": cols[:, 0].astype(np.int32), "line_ends": cols[:, 1].astype(np.int32),
                "line_writers": cols[:, 2].astype(np.int32), "line_tokens": cols[:, 3].astype(np.int32)}

    def save_due(self) -> bool:
        """Whether the notes indexed since the last snapshot call for a new one: every 1/32
        of growth, so saving costs O(1) per unit written and a reopen indexes at most ~3%.
        Never while notes are pending: a snapshot holds the vectors of the notes it covers."""
        grown = len(self.notes) - self.saved_covers
        return isinstance(self.store, IndexSnapshots) and not self.pending \
            and grown >= max(32, len(self.notes) // 32)

    def save(self, tokenizer: str = "") -> None:
        """Store a snapshot of this index (a store without the capability keeps none), with
        the token counts of the timeline lines built so far if ``tokenizer`` names their counter."""
        if not isinstance(self.store, IndexSnapshots) or not self.notes or self.pending:
            return
        arrays = self.bm25.export()
        if tokenizer:
            arrays.update(self._line_arrays(tokenizer))
        arrays["piece_counts"] = np.asarray([len(self.unit_docs[n.unit_key]) for n in self.notes],
                                            dtype=np.int32)
        arrays["doc_piece"] = np.asarray(self.doc_piece, dtype=np.int32)
        arrays["doc_tokens"] = self._doc_tokens.view.astype(np.int32)
        arrays["piece_vectors"] = self._piece_vectors.view
        arrays["own_docs"] = self._own_docs.view.astype(np.int32)
        arrays["note_vectors"] = self.vectors
        arrays["note_data"] = np.frombuffer(codec.notes_blob(self.notes), dtype=np.uint8)
        self.store.put_index_snapshot(self.namespace,
                                      snapshot.encode(arrays, [n.unit_key for n in self.notes]))
        self.saved_covers = len(self.notes)

    def _add_notes(self, notes: Sequence[Note], stacked: np.ndarray | None = None) -> None:
        """Index many notes at once (a restore): one stacked copy of their vectors. ``stacked``:
        the notes' vectors as the rows of one matrix, where the caller has them so (a
        snapshot's notes, whose embeddings are its rows: one copy, not a gather of every note's)."""
        if self._n or not notes:
            for note in notes:
                self._add_note(note)
            return
        if stacked is not None and stacked.shape[0] == len(notes):
            dim = stacked.shape[1]
        else:
            stacked = None
            rows = [np.asarray(n.embedding, dtype=np.float32).reshape(-1) for n in notes]
            dim = rows[0].shape[0]
        # Stacked straight into the growable buffer (np.empty: the spare half is never read
        # nor touched), not stacked into a copy and then copied again into zeroed memory.
        vectors = np.empty((max(64, 2 * len(notes)), dim), dtype=np.float32)
        try:
            if stacked is not None:
                vectors[: len(notes)] = stacked
            else:
                np.stack(rows, out=vectors[: len(notes)])
        except ValueError:
            raise ValueError(f"notes of namespace {self.namespace!r} have embeddings of different "
                             "dimensions") from None
        self._vectors = vectors
        self._n = len(notes)
        self.position.update((n.unit_key, i) for i, n in enumerate(notes))
        self.notes.extend(notes)
        for note in notes:
            for target in note.links:
                self.back_links.setdefault(target, set()).add(note.unit_key)

    def _add_note(self, note: Note) -> None:
        vec = np.asarray(note.embedding, dtype=np.float32).reshape(-1)
        if self._vectors.shape[1] != vec.shape[0]:
            if self._n:
                raise ValueError(f"embedding dimension {vec.shape[0]} != index dimension "
                                 f"{self._vectors.shape[1]} in namespace {self.namespace!r}")
            self._vectors = np.zeros((0, vec.shape[0]), dtype=np.float32)
        if self._n == len(self._vectors):
            grown = np.zeros((max(64, 2 * self._n), vec.shape[0]), dtype=np.float32)
            grown[: self._n] = self._vectors[: self._n]
            self._vectors = grown
        self._vectors[self._n] = vec
        self._n += 1
        self.position[note.unit_key] = len(self.notes)
        self.notes.append(note)
        for target in note.links:
            self.back_links.setdefault(target, set()).add(note.unit_key)

    def add(self, note: Note, pieces: Sequence[Piece], pending: bool = False) -> None:
        """Index a newly written note and its pieces (``pending``: its vector is made later,
        :meth:`set_vector`; the note's embedding is a row of zeros until then)."""
        if note.unit_key in self.position:
            return
        if pending:
            self.pending.append(len(self.notes))
        dim = np.asarray(note.embedding).size
        own_vectors = [np.asarray(p.embedding, dtype=np.float32).reshape(-1) if p.embedding is not None else None
                       for p in pieces]
        if any(v is not None and len(v) != dim for v in own_vectors):  # refused before anything changes
            raise ValueError(f"a piece vector of unit {note.unit_key!r} does not have its note "
                             f"vector's dimension {dim}")
        self._add_note(note)
        docs = self.bm25.add(p.text for p in pieces)
        self.unit_docs[note.unit_key] = docs
        self.doc_unit.extend(note.unit_key for _ in pieces)
        self.doc_piece.extend(p.index for p in pieces)
        self._doc_tokens.extend(p.tokens for p in pieces)
        self._doc_note.extend(self.position[note.unit_key] for _ in pieces)
        own = [(doc, v) for doc, v in zip(docs, own_vectors) if v is not None]
        if own:
            self._piece_vectors.extend(np.stack([v for _, v in own]))
            self._own_docs.extend(doc for doc, _ in own)

    def set_vector(self, note: Note) -> None:
        """A pending note's vector and links, made after it was indexed (the note as stored)."""
        pos = self.position[note.unit_key]
        vec = np.asarray(note.embedding, dtype=np.float32).reshape(-1)
        if len(vec) != self._vectors.shape[1]:
            if len(self.pending) < self._n:
                raise ValueError(f"embedding dimension {len(vec)} != index dimension "
                                 f"{self._vectors.shape[1]} in namespace {self.namespace!r}")
            self._vectors = np.zeros((len(self._vectors), len(vec)), dtype=np.float32)  # only stand-ins so far
        self._vectors[pos] = vec
        self.notes[pos] = note  # a pending note has no links to take back
        for target in note.links:
            self.back_links.setdefault(target, set()).add(note.unit_key)
        self.pending.remove(pos)
        # the kept products read the old rows
        self._last_cosines = self._last_note_cosines = self._last_ranks = self._last_note_ranks = None

    def ready(self) -> None:
        """Make the pending notes' vectors, where any (before every read of vectors or links)."""
        if self.pending and self.fill_pending is not None:
            self.fill_pending()
        if self.pending:
            raise RuntimeError(f"namespace {self.namespace!r}: {len(self.pending)} notes still have no vector")

    @property
    def note_dim(self) -> int:
        """The dimension of the note vectors indexed so far (0 before the first)."""
        return int(self._vectors.shape[1]) if self._n else 0

    @property
    def vectors(self) -> np.ndarray:
        self.ready()
        return self._vectors[: self._n]

    def note(self, key: str) -> Note:
        return self.notes[self.position[key]]

    def is_prefix(self, first: str, last: str, n: int) -> bool:
        """Whether a chain of ``n`` units from ``first`` to ``last`` is exactly the first ``n``
        notes written (the usual old units). A chain's positions only increase (a unit is
        written after its parent), so ``first`` at 0 and ``last`` at ``n - 1`` mean all of them."""
        return n > 0 and self.position.get(first) == 0 and self.position.get(last) == n - 1

    def notes_of_units(self, units: Sequence[Any]) -> Sequence[Note]:
        """The notes of a chain of units (anything with a ``key``): a slice in the usual
        prefix case, found without listing every key."""
        if units and self.is_prefix(units[0].key, units[-1].key, len(units)):
            return self.notes[:len(units)]
        return [self.note(u.key) for u in units]

    def nearest(self, vec: np.ndarray, k: int, before: int | None = None) -> list[str]:
        """Keys of the ``k`` notes with the highest cosine to ``vec`` (ties: earlier first),
        among the first ``before`` notes (all with None): the links of a note written at that
        position, whose earlier notes all have their vectors."""
        n = self._n if before is None else min(before, self._n)
        if k <= 0 or n == 0:
            return []
        rows = self.vectors[:n] if before is None else self._vectors[:n]
        return [self.notes[int(i)].unit_key for i in top_k(row_dots(rows, vec), k)]

    def links_of(self, key: str) -> set[str]:
        """Both directions of the links of a note."""
        self.ready()
        out = set(self.back_links.get(key, ()))
        if key in self.position:
            out.update(self.note(key).links)
        return out

    def doc_tokens_array(self) -> np.ndarray:
        """Token count of every piece document."""
        return self._doc_tokens.view

    def doc_note_array(self) -> np.ndarray:
        """Position in ``notes`` of the unit of every piece document."""
        return self._doc_note.view

    def missing_piece_docs(self) -> np.ndarray:
        """The piece documents without their own vector, ascending."""
        if len(self._own_docs) == len(self.doc_unit):
            return np.zeros(0, dtype=np.int64)
        return np.setdiff1d(np.arange(len(self.doc_unit), dtype=np.int64), self._own_docs.view, assume_unique=True)

    def fill_piece_vectors(self, docs: np.ndarray, rows: np.ndarray) -> None:
        """Give the piece documents ``docs`` their own vectors ``rows`` (filled after their
        units were written, :mod:`flexamem_core.render.piece_fill`); a document that has one
        keeps it. The own rows stay in document order, so the matrix is rebuilt: once per
        fill, never per render."""
        docs = np.asarray(docs, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.float32).reshape(len(docs), -1)
        own = self._own_docs.view
        new = ~np.isin(docs, own)
        if not new.any():
            return
        if rows.shape[1] != self._vectors.shape[1]:
            raise ValueError(f"piece vector dimension {rows.shape[1]} != index dimension {self._vectors.shape[1]}")
        all_docs = np.concatenate([own, docs[new]])
        order = np.argsort(all_docs, kind="stable")
        self._own_docs = GrowableArray.of(all_docs[order], np.int64)
        self._piece_vectors = _Rows.of(np.concatenate([self._piece_vectors.view, rows[new]])[order])
        self._last_cosines = None  # both kept results read the old rows
        self._last_ranks = None

    @property
    def own_piece_vectors(self) -> int:
        """Piece documents that carry their own vector (the others use their note's)."""
        return len(self._own_docs)

    @property
    def piece_vectors(self) -> np.ndarray:
        """One row per piece document, its own vector or its note's (see the class): a new
        matrix, for inspection; scoring never builds it."""
        return self._piece_rows(np.arange(len(self.doc_unit)))

    def _piece_rows(self, docs: np.ndarray) -> np.ndarray:
        """The vectors of the piece documents ``docs``, own or their note's."""
        out = self.vectors[self._doc_note.view[docs]]
        own = self._own_docs.view
        if len(own) and len(docs):
            at = np.minimum(np.searchsorted(own, docs), len(own) - 1)
            has = own[at] == docs
            out[has] = self._piece_vectors.take(at[has])
        return out

    def piece_cosines(self, docs: Sequence[int] | np.ndarray | None, q_vec: np.ndarray) -> np.ndarray:
        """Cosine of each piece document (all of them with ``docs=None``) with the query, from
        the stored vectors: no model call."""
        if docs is None:
            return self._all_cosines(q_vec)
        docs = np.asarray(docs, dtype=np.int64)
        if 8 * len(docs) > len(self.doc_unit):
            # many documents (the old units' pieces): one product over the matrix in place,
            # not a copy of the rows it would gather first
            return self._all_cosines(q_vec)[docs]
        return row_dots(self._piece_rows(docs), q_vec)

    def note_cosines(self, q_vec: np.ndarray) -> np.ndarray:
        """Every note's cosine with ``q_vec`` (read-only): one product over the note matrix per
        query, kept, keyed by the vector, the matrix and its row count: the seeds and the piece
        cosines of one render read the same product instead of making it twice."""
        self.ready()
        last = self._last_note_cosines
        if last is not None and last[1] is self._vectors and last[2] == self._n and np.array_equal(last[0], q_vec):
            return last[3]
        out = row_dots(self.vectors, q_vec)
        out.setflags(write=False)
        self._last_note_cosines = (np.array(q_vec, copy=True), self._vectors, self._n, out)
        return out

    def note_cosine_ranks(self, q_vec: np.ndarray, n: int) -> np.ndarray:
        """``ranks(note_cosines(q_vec)[:n])`` (read-only), kept for the last query and ``n``: a
        render ranks the old notes for its seeds and, where every old note has pieces, for
        the piece ranking by notes (:meth:`note_groups`)."""
        cos = self.note_cosines(q_vec)
        last = self._last_note_ranks
        if last is not None and last[0] is cos and last[1] == n:
            return last[2]
        out = ranks(cos[:n])
        out.setflags(write=False)
        self._last_note_ranks = (cos, n, out)
        return out

    def _all_cosines(self, q_vec: np.ndarray) -> np.ndarray:
        """Every piece's cosine with ``q_vec`` (read-only). An automatic render ranks the old
        pieces for its signals and again for the pieces it shows, with one query vector: the
        last product is kept, keyed by the vector, the matrix and its row count (rows are only
        ever appended; a loaded snapshot is a new matrix). A piece without its own vector
        takes its note's cosine: one product over the notes, not over the pieces."""
        rows = self._piece_vectors
        n = len(self.doc_unit)
        last = self._last_cosines
        if last is not None and last[1] is rows and last[2] == n and np.array_equal(last[0], q_vec):
            return last[3]
        out = self.note_cosines(q_vec)[self._doc_note.view]
        if len(rows):
            out[self._own_docs.view] = rows.dot(q_vec)
        out.setflags(write=False)
        self._last_cosines = (np.array(q_vec, copy=True), rows, n, out)
        return out

    def piece_cosine_ranks(self, docs: np.ndarray, q_vec: np.ndarray) -> np.ndarray:
        """1-based ranks of the cosines of ``docs`` with ``q_vec`` among them, largest first,
        ties by position in ``docs`` (:func:`.fusion.ranks` of :meth:`piece_cosines`).

        The last ranking is kept: an automatic render ranks the same old pieces with one
        query vector up to three times (its signals, its seeds, the pieces it shows). Where
        none of ``docs`` has its own vector (agents by default) and they ascend, a piece's
        cosine is its note's and a note's pieces are neighbours, so ranking the notes and
        numbering each note's pieces in order gives the same ranks: a sort of the notes, not
        of their many more pieces (:meth:`note_groups`)."""
        docs = np.asarray(docs, dtype=np.int64)
        if 8 * len(docs) <= len(self.doc_unit):  # a few documents: their own product, as piece_cosines
            return ranks(self.piece_cosines(docs, q_vec))
        groups = self._ranked(docs, q_vec)
        last = self._last_ranks
        assert last is not None
        if last[2] is None:
            if groups is None:
                out = ranks(self._all_cosines(q_vec)[docs]) if len(docs) else np.zeros(0, dtype=np.float64)
            else:
                out = np.repeat(groups.first, groups.counts) + (
                    np.arange(len(docs)) - np.repeat(groups.starts, groups.counts))
            out.setflags(write=False)
            self._last_ranks = (last[0], last[1], out, last[3])
            return out
        return last[2]

    def note_groups(self, docs: np.ndarray, q_vec: np.ndarray) -> NoteGroups | None:
        """Where :meth:`piece_cosine_ranks` ranks ``docs`` by their notes, the notes' runs of
        pieces in ``docs`` with the rank of each run's first piece; None where the pieces
        are ranked one by one (a few documents, own piece vectors, or ``docs`` not ascending)."""
        docs = np.asarray(docs, dtype=np.int64)
        if 8 * len(docs) <= len(self.doc_unit):
            return None
        return self._ranked(docs, q_vec)

    def _ranked(self, docs: np.ndarray, q_vec: np.ndarray) -> NoteGroups | None:
        """The note groups of ``docs`` (kept for the same query and docs).

        The old units' documents are usually the first ``len(docs)`` written: then the runs
        are read from :meth:`_note_run_starts`, kept as documents are added, and nothing
        here passes over every old piece but the check that ``docs`` ascend; only the notes
        are ranked."""
        note_cos = self.note_cosines(q_vec)
        ascending = len(docs) < 2 or bool((docs[1:] > docs[:-1]).all())
        first_docs = ascending and len(docs) > 0 and docs[0] == 0 and docs[-1] == len(docs) - 1
        last = self._last_ranks
        if last is not None and last[0] is note_cos and _same_docs(last[1], docs, first_docs):
            return last[3]
        # kept with the result: the first documents by their count, others copied (the
        # caller's array may change)
        kept: int | np.ndarray = len(docs) if first_docs else docs.copy()
        groups = None
        if len(docs) and ascending and self._note_ranked_docs(docs):
            if first_docs:
                docs = self._first_docs(len(docs))  # read-only: the caller's array may change
                starts = self._note_run_starts(len(docs))  # positions in docs are documents
                owner_at_starts = self._doc_note.view[starts]
            else:
                docs = kept  # type: ignore[assignment]
                owner = self._doc_note.view[docs]
                starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
                owner_at_starts = owner[starts]
            counts = np.diff(np.append(starts, len(docs)))
            k = len(starts)
            by_note = first_docs and owner_at_starts[-1] == k - 1  # the first k notes, each with pieces
            # a note's cosine, once per note (for the first notes, as the seeds rank them)
            group = self.note_cosine_ranks(q_vec, k) if by_note else ranks(note_cos[owner_at_starts])
            # The ranks are a permutation of 1..n, so the order that sorts them is its inverse
            # (linear, where a sort would cost n log n on every per-call render).
            order = np.empty(len(starts), dtype=np.int64)
            order[group.astype(np.int64) - 1] = np.arange(len(starts))
            first = np.empty(len(starts), dtype=np.float64)
            first[order] = np.cumsum(counts[order]) - counts[order] + 1
            groups = NoteGroups(docs, starts, counts, first, order,
                                self._doc_note.view[: len(docs)] if by_note else None)
        self._last_ranks = (note_cos, kept, None, groups)
        return groups

    def _first_docs(self, n: int) -> np.ndarray:
        """``np.arange(n)``, read-only, from one buffer grown by doubling."""
        if len(self._doc_numbers) < n:
            self._doc_numbers = np.arange(max(n, 2 * len(self._doc_numbers)), dtype=np.int64)
            self._doc_numbers.setflags(write=False)
        return self._doc_numbers[:n]

    def _note_run_starts(self, n_docs: int) -> np.ndarray:
        """The first document of each note's run among the first ``n_docs`` documents: where
        ``doc_note`` changes, scanned once per document added (a restore makes a new buffer)."""
        doc_note = self._doc_note.view
        kept = self._run_starts
        if kept is None or kept[0] is not self._doc_note:
            kept = (self._doc_note, 0, GrowableArray(np.int64))
        buffer, scanned, starts = kept
        if scanned < len(doc_note):
            new = doc_note[scanned:]
            before = doc_note[scanned - 1] if scanned else -1
            starts.extend((np.flatnonzero(np.r_[new[0] != before, new[1:] != new[:-1]]) + scanned).tolist())
            kept = (buffer, len(doc_note), starts)
        self._run_starts = kept
        return starts.view[: int(np.searchsorted(starts.view, n_docs))]

    def _note_ranked_docs(self, docs: np.ndarray) -> bool:
        """Whether ``docs`` (ascending) all take their note's cosine (no own vector among them)."""
        own = self._own_docs.view
        if len(own) == 0:
            return True
        at = np.searchsorted(own, docs[0])
        return at == len(own) or own[at] > docs[-1]

    def get_merged(self, key: str) -> MergedRecord | None:
        """The merged record ``key``, read from the store once.

        A render builds the merged lines it shows, and on a reopen the line counts of the
        snapshot or of the merged records spare it the others: a few dozen records, read
        one by one. Without those counts it builds every merged line of the history (thousands
        in a long one), so after ``MERGED_POINT_READS`` reads the store lists them all in
        one query (``MergedListing``).
        """
        found = self.merged.get(key)
        if found is None and self._merged_reads >= MERGED_POINT_READS and self._list_merged():
            found = self.merged.get(key)
        if found is None:
            self._merged_reads += 1
            found = self.store.get_merged(self.namespace, key)
            if found is not None:
                self.merged[key] = found
        return found

    def _list_merged(self) -> bool:
        """Read every merged record of the namespace in one query, the first time it is asked
        (a store without ``MergedListing`` has none to give); whether any were listed."""
        if self._merged_listed or not isinstance(self.store, MergedListing):
            return False
        self._merged_listed = True
        for m in self.store.merged_records(self.namespace):
            self.merged.setdefault(m.key, m)
        return True

    def merged_line_tokens(self, tokenizer: str, line_format: int) -> Mapping[tuple[int, int, str], int]:
        """The line counts the store's merged records carry (counted by ``tokenizer`` in
        ``line_format``), by (start, end, writer) over the notes, as :meth:`saved_lines` gives
        the snapshot's. The records are listed once: a reopen whose snapshot was saved before
        the merges it will show (a history written whole, then rendered) counts the hidden
        lines from them instead of building every merged line, and the next snapshot keeps
        those counts."""
        counter = f"{tokenizer}/{line_format}"
        if self._merged_spans is None or self._merged_spans[0] != counter:
            self._list_merged()
            spans: dict[tuple[int, int, str], int] = {}
            for m in self.merged.values():
                tokens = m.line_count(counter)
                if tokens is None or not m.covers:
                    continue
                start, last = self.position.get(m.covers[0]), self.position.get(m.covers[-1])
                # the last key names the chain it ends (a unit's key includes its parent's)
                if start is not None and last is not None and last - start + 1 == len(m.covers):
                    spans[(start, last + 1, m.writer)] = tokens
            self._merged_spans = (counter, spans)
        return self._merged_spans[1]

    def put_merged(self, merged: MergedRecord) -> None:
        self.merged[merged.key] = merged
        self.store.put_merged(self.namespace, merged)
