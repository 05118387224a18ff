"""The store conformance suite, for any backend: a third-party store runs it in a few lines.

Write-once, edits forking a new chain, isolation between namespaces (a canary planted in
one tenant is never seen from another), forgetting (a deleted unit leaves no text in any
read or any raw query of the backend), reopening, the optional capabilities (index
snapshots, one-read merged records, a URL), and a model-based property test::

    import pytest
    from flexamem_core.testing import StoreBackend, StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def backend(self, tmp_path):
            yield StoreBackend("mine", MyStore(tmp_path / "db"),
                               reopen=lambda: MyStore(tmp_path / "db"),
                               raw_dump=lambda store: (tmp_path / "db").read_bytes().decode("utf-8", "replace"))

``raw_dump`` returns everything the backend holds, as text, however it is stored (the
forgetting tests look for a canary in it). Needs the ``test`` extra (pytest, hypothesis).
"""

from __future__ import annotations

import dataclasses
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ..index.snapshot import IndexSnapshots, MergedListing, NamespaceVersions, NotesFrom
from ..model.protocols import PieceVectorFill, RequestStates, Store
from ..stores import ForgettingStore, NamespaceError, forget_tenant, open_store, store_url
from .backend import StoreBackend
from .storekit import make_chain, make_merged, make_unit, snapshot, vector

__all__ = ["StoreBackend", "StoreConformance"]

NS = "tenant-a/thread-1"


def write_all(store, namespace, triples) -> list[bool]:
    return [store.write_unit(namespace, *t) for t in triples]


CANARY = "zebracanary7781"
TENANTS = ["tenant-a/thread-1", "tenant-a/thread-2", "tenant-b/thread-1", "tenant-b", "c:d@e.f_g-h"]


def _build_forgettable(store, ns):
    chain = make_chain("fg", 6, texts={2: f"secret output {CANARY}"})
    write_all(store, ns, chain)
    keys = [t[0].key for t in chain]
    low_a = make_merged(keys[0:3], f"merged 1-3 mentions {CANARY}")
    low_b = make_merged(keys[3:5], "merged 4-5")
    high = make_merged([low_a.key, low_b.key], f"merged of merged {CANARY}", level=2)
    for m in (low_a, low_b, high):
        store.put_merged(ns, m)
    return chain, keys, (low_a, low_b, high)


POOL = make_chain("pool", 6, n_pieces=2)
POOL_KEYS = [t[0].key for t in POOL]
MERGES = [make_merged(POOL_KEYS[i:j], f"merge {i}-{j}") for i, j in ((0, 2), (1, 4), (3, 6), (0, 6))]
OPS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("merge"), st.integers(0, len(MERGES))),
), max_size=14)


class Model:
    """What a store must hold after a sequence of writes, merges and deletions."""

    def __init__(self) -> None:
        self.order: list[int] = []
        self.links: dict[int, list[str]] = {}
        self.merged: dict[str, tuple[str, ...]] = {}

    def apply(self, op: str, i: int) -> None:
        keys = {POOL_KEYS[j] for j in self.order}
        if op == "write" and i not in self.order:
            self.order.append(i)
            self.links[i] = list(POOL[i][1].links)
        elif op == "delete" and i in self.order:
            self.order.remove(i)
            gone = {POOL_KEYS[i]}
            for j in self.order:
                self.links[j] = [k for k in self.links[j] if k != POOL_KEYS[i]]
            while True:
                drop = [m for m, cov in self.merged.items() if m not in gone and gone & set(cov)]
                if not drop:
                    break
                gone.update(drop)
                for m in drop:
                    del self.merged[m]
        elif op == "merge":
            m = [*MERGES, make_merged([MERGES[0].key, POOL_KEYS[2]], "upper", 2)][i]
            if all(c in keys or c in self.merged for c in m.covers):
                self.merged.setdefault(m.key, m.covers)


class StoreConformance:
    """The conformance tests; subclass it in a test module and give a ``backend`` fixture
    that yields a fresh :class:`StoreBackend` (an empty store) per test."""

    def test_backend_implements_the_protocols(self, backend):
        store = backend.first
        assert isinstance(store, Store)
        assert isinstance(store, ForgettingStore)

    def test_round_trip_is_exact(self, backend):
        store = backend.first
        chain = make_chain("rt", 5, texts={2: "naïve 日本語 \"quotes\" \\ back\tslash\x00nul",
                                        # two lone surrogates side by side stay two code points
                                        3: "pair \ud83d\ude00 reversed \udc00\ud800 lone \ud800 😀",
                                        4: 'marker-like {"$flexamem_str32": "41"}'})
        assert write_all(store, NS, chain) == [True] * 5
        notes = store.notes(NS)
        assert [n.unit_key for n in notes] == [t[0].key for t in chain]
        for note, (unit, expected, pieces) in zip(notes, chain, strict=True):
            assert note == expected
            assert note.embedding.dtype == np.float32
            np.testing.assert_array_equal(note.embedding, expected.embedding)
            assert store.get_unit(NS, unit.key).to_dict() == unit.to_dict()
            assert store.pieces(NS, unit.key) == pieces
            assert store.has_unit(NS, unit.key)
        assert list(store.iter_pieces(NS)) == [p for t in chain for p in t[2]]
        assert store.parents(NS) == {t[0].key: t[0].parent for t in chain}
        assert store.namespaces() == [NS]
        assert not store.has_unit(NS, "no-such-key")
        assert store.pieces(NS, "no-such-key") == []
        with pytest.raises(KeyError):
            store.get_unit(NS, "no-such-key")

    def test_empty_namespace_reads_are_empty(self, backend):
        store = backend.first
        assert store.notes("nobody") == []
        assert store.parents("nobody") == {}
        assert list(store.iter_pieces("nobody")) == []
        assert store.get_merged("nobody", "k") is None
        assert store.namespaces() == []

    def test_rewrite_is_a_no_op(self, backend):
        store = backend.first
        chain = make_chain("wo", 3)
        write_all(store, NS, chain)
        before = snapshot(store, NS)
        assert write_all(store, NS, chain) == [False] * 3
        unit, note, pieces = chain[1]
        other_note = dataclasses.replace(note, record="rewritten!")
        assert store.write_unit(NS, unit, other_note, pieces[:1]) is False  # write-once: nothing changes
        assert snapshot(store, NS) == before
        assert "rewritten!" not in backend.raw_dump(store)

    def test_message_edited_under_same_id_forks_a_new_unit(self, backend):
        store = backend.first
        root = make_unit("ed", 1, None)
        original = make_unit("ed", 2, root[0].key, text="ls printed a.txt", msg_id="msg-7")
        edited = make_unit("ed", 2, root[0].key, text="ls printed b.txt", msg_id="msg-7")
        assert original[0].message_ids == edited[0].message_ids
        assert original[0].key != edited[0].key  # same id, new content: a new version
        child = make_unit("ed", 3, edited[0].key)
        assert write_all(store, NS, [root, original, edited, child]) == [True] * 4
        parents = store.parents(NS)
        assert parents[original[0].key] == parents[edited[0].key] == root[0].key  # the chain forks
        assert parents[child[0].key] == edited[0].key
        assert store.get_unit(NS, original[0].key).raw != store.get_unit(NS, edited[0].key).raw  # old kept
        assert [n.unit_key for n in store.notes(NS)] == [t[0].key for t in (root, original, edited, child)]

    def test_merged_records_are_memoised_once(self, backend):
        store = backend.first
        chain = make_chain("mr", 4)
        write_all(store, NS, chain)
        keys = [t[0].key for t in chain]
        first = make_merged(keys[:2], "first merge")
        store.put_merged(NS, first)
        store.put_merged(NS, dataclasses.replace(first, text="second text"))
        assert store.get_merged(NS, first.key) == first
        upper = make_merged([first.key, keys[2]], "merge of a merge", level=2)
        store.put_merged(NS, upper)
        assert store.get_merged(NS, upper.key) == upper
        dangling = make_merged([keys[3], "never-stored"], "covers a unit that is not stored")
        store.put_merged(NS, dangling)
        assert store.get_merged(NS, dangling.key) is None

    def test_canary_in_one_tenant_is_invisible_from_every_other(self, backend):
        store = backend.first
        chains = {ns: make_chain(ns.replace("/", "-"), 4) for ns in TENANTS}
        planted = make_chain("secret", 3, texts={1: f"the password is {CANARY}"})
        shared = make_unit("shared", 1, None)  # the same unit (same key) stored in two tenants
        for ns, chain in chains.items():
            write_all(store, ns, chain)
        write_all(store, TENANTS[0], planted)
        store.write_unit(TENANTS[0], *shared)
        assert store.write_unit(TENANTS[2], *shared) is True  # keys are per namespace
        secret = make_merged([t[0].key for t in planted], f"merged: {CANARY}")
        store.put_merged(TENANTS[0], secret)
        store.put_merged(TENANTS[2], secret)  # covers units that tenant b does not hold: refused
        planted_key = planted[1][0].key

        assert any(CANARY in p.text for p in store.iter_pieces(TENANTS[0]))
        for ns in TENANTS[1:]:
            assert all(CANARY not in p.text for p in store.iter_pieces(ns))
            assert all(CANARY not in str(n.to_dict()) for n in store.notes(ns))
            assert store.get_merged(ns, secret.key) is None
            assert not store.has_unit(ns, planted_key)
            assert planted_key not in store.parents(ns)
            assert store.pieces(ns, planted_key) == []
            with pytest.raises(KeyError):
                store.get_unit(ns, planted_key)
            assert {n.unit_key for n in store.notes(ns)} <= {t[0].key for t in chains[ns]} | {shared[0].key}
        assert sorted(store.namespaces()) == sorted(TENANTS)
        assert store.delete_unit(TENANTS[0], shared[0].key)
        assert store.has_unit(TENANTS[2], shared[0].key)  # deleting in one tenant leaves the other's

    def test_forgetting_a_unit_removes_everything_derived_from_it(self, backend):
        store = backend.first
        chain, keys, (low_a, low_b, high) = _build_forgettable(store, NS)
        other = make_chain("keep", 2)
        write_all(store, "tenant-z", other)
        linking = [n.unit_key for n in store.notes(NS) if keys[2] in n.links]
        assert linking == keys[3:6]
        assert CANARY in backend.raw_dump(store)

        assert store.delete_unit(NS, keys[2]) is True
        assert store.delete_unit(NS, keys[2]) is False
        assert not store.has_unit(NS, keys[2])
        with pytest.raises(KeyError):
            store.get_unit(NS, keys[2])
        assert store.pieces(NS, keys[2]) == []
        notes = store.notes(NS)
        assert [n.unit_key for n in notes] == keys[:2] + keys[3:]
        for note, (_, original, _) in zip(notes, chain[:2] + chain[3:], strict=True):
            assert note.links == tuple(k for k in original.links if k != keys[2])  # links to it removed
        assert keys[2] not in store.parents(NS)
        assert all(p.unit_key != keys[2] for p in store.iter_pieces(NS))
        assert store.get_merged(NS, low_a.key) is None  # covered it
        assert store.get_merged(NS, high.key) is None  # covered it through low_a
        assert store.get_merged(NS, low_b.key) == low_b  # did not
        assert CANARY not in backend.raw_dump(store)  # no raw query of the backend returns its text
        assert snapshot(store, "tenant-z")["parents"] == {t[0].key: t[0].parent for t in other}

    def test_forgetting_a_thread_and_a_tenant(self, backend):
        store = backend.first
        for ns in ("acme", "acme/t1", "acme/t2", "acme2", "other/acme"):
            _build_forgettable(store, ns)
        assert store.delete_namespace("acme/t1") == 6
        assert store.notes("acme/t1") == [] and list(store.iter_pieces("acme/t1")) == []
        assert store.delete_namespace("acme/t1") == 0
        assert forget_tenant(store, "acme") == 12
        assert sorted(store.namespaces()) == ["acme2", "other/acme"]
        for ns in ("acme", "acme/t2"):
            assert store.notes(ns) == [] and store.parents(ns) == {}
        assert len(store.notes("acme2")) == 6
        forget_tenant(store, "acme2")
        forget_tenant(store, "other")
        assert store.namespaces() == []
        assert CANARY not in backend.raw_dump(store)

    @pytest.mark.parametrize("bad", ["", " ", "../etc", "a b", "x'; DROP TABLE units; --", "a" * 201,
                                     "-leading", "tab\there", "ns\x00", None, 7])
    def test_bad_namespaces_are_rejected_before_any_query(self, backend, bad):
        store = backend.first
        write_all(store, NS, make_chain("ok", 1))
        unit, note, pieces = make_unit("bad", 1, None)
        calls = [lambda: store.write_unit(bad, unit, note, pieces), lambda: store.notes(bad),
                 lambda: store.has_unit(bad, "k"), lambda: store.get_unit(bad, "k"),
                 lambda: store.parents(bad), lambda: list(store.iter_pieces(bad)),
                 lambda: store.pieces(bad, "k"), lambda: store.get_merged(bad, "k"),
                 lambda: store.delete_unit(bad, "k"), lambda: store.delete_namespace(bad)]
        for call in calls:
            with pytest.raises(NamespaceError):
                call()
        assert len(store.notes(NS)) == 1  # nothing was harmed

    def test_a_note_for_another_unit_is_rejected(self, backend):
        store = backend.first
        a, b = make_unit("x", 1, None), make_unit("y", 1, None)
        with pytest.raises(ValueError, match="note is for unit"):
            store.write_unit(NS, a[0], b[1], a[2])
        with pytest.raises(ValueError, match="piece 0 is for unit"):
            store.write_unit(NS, a[0], a[1], b[2])
        assert store.notes(NS) == []

    def test_reopened_store_reads_the_same(self, backend):
        if not backend.persistent:
            pytest.skip(f"{backend.name} does not outlive its store object")
        store = backend.first
        chain = make_chain("re", 5)
        write_all(store, NS, chain)
        merged = make_merged([t[0].key for t in chain[:3]], "merged 1-3")
        store.put_merged(NS, merged)
        before = snapshot(store, NS)
        if hasattr(store, "close"):
            store.close()
        again = backend.open()
        assert snapshot(again, NS) == before
        assert again.get_merged(NS, merged.key) == merged
        assert again.write_unit(NS, *chain[0]) is False

    # -- model-based property test --------------------------------------------------------

    def test_any_sequence_of_operations_matches_the_model(self, backend):
        store = backend.first
        all_merges = [*MERGES, make_merged([MERGES[0].key, POOL_KEYS[2]], "upper", 2)]

        @settings(max_examples=backend.examples, deadline=None)
        @given(ops=OPS)
        def check(ops):
            ns, model = f"p-{uuid.uuid4().hex[:10]}", Model()
            for op, i in ops:
                if op == "write":
                    assert store.write_unit(ns, *POOL[i]) == (i not in model.order)
                elif op == "delete":
                    assert store.delete_unit(ns, POOL_KEYS[i]) == (i in model.order)
                else:
                    store.put_merged(ns, all_merges[i])
                model.apply(op, i)
            notes = store.notes(ns)
            assert [n.unit_key for n in notes] == [POOL_KEYS[i] for i in model.order]
            assert [list(n.links) for n in notes] == [model.links[i] for i in model.order]
            assert [p.unit_key for p in store.iter_pieces(ns)] == [
                POOL_KEYS[i] for i in model.order for _ in range(2)]
            for m in all_merges:
                assert (store.get_merged(ns, m.key) is not None) == (m.key in model.merged)

        check()

    def test_piece_vectors_read_back_exactly(self, backend):
        """The piece vectors capability: a piece written with its own vector (``piece_vectors``,
        opt-in) reads back with exactly that float32 vector, from ``pieces``, ``iter_pieces``
        and a reopened store; a piece written without one reads back without.
        A store may drop them all (renders then fall back to unit vectors), never alter them."""
        store = backend.first
        with_vectors = make_chain("pv", 3, piece_vectors=True)
        mixed = make_unit("pv", 4, with_vectors[-1][0].key, piece_vectors=[True, False, True])
        without = make_chain("pv", 2, parent=mixed[0].key, first_step=5)
        chain = [*with_vectors, mixed, *without]
        write_all(store, NS, chain)
        stores = [store, backend.open()] if backend.persistent else [store]
        kept = [p.embedding is not None for s in stores for p in s.iter_pieces(NS)]
        if not any(kept) and not getattr(backend, "piece_vectors", None):
            pytest.skip(f"{type(store).__name__} keeps no piece vectors (renders use unit vectors)")
        for s in stores:
            by_unit = [s.pieces(NS, unit.key) for unit, _, _ in chain]
            for got, (_, _, expected) in zip([*by_unit, list(s.iter_pieces(NS))],
                                             [*chain, (None, None, [p for t in chain for p in t[2]])]):
                assert len(got) == len(expected)
                for g, e in zip(got, expected, strict=True):
                    assert g == e
                    if e.embedding is None:
                        assert g.embedding is None, (g.unit_key, g.index)
                    else:
                        assert g.embedding is not None and g.embedding.dtype == np.float32
                        np.testing.assert_array_equal(g.embedding, e.embedding)
                        assert g.to_dict() == e.to_dict()

    def test_piece_vectors_filled_after_the_write(self, backend):
        """The piece vector fill capability (``PieceVectorFill``): a piece stored without its
        own vector gets exactly the one filled later, read back from ``pieces``, ``iter_pieces``
        and a reopened store; a piece that has one keeps it; a unit not stored is skipped; a
        bad vector is refused before anything changes."""
        store = backend.first
        if not isinstance(store, PieceVectorFill):
            pytest.skip(f"{type(store).__name__} cannot fill piece vectors (catch-ups embed pieces as they write)")
        chain = make_chain("fill", 2)
        chain.append(make_unit("fill", 3, chain[-1][0].key, piece_vectors=[True, False, True]))
        write_all(store, NS, chain)
        filled = {(u.key, j): vector(f"{u.key}/filled {j}") for u, _, plist in chain for j in range(len(plist))}
        with pytest.raises(ValueError):
            store.put_piece_vectors(NS, chain[0][0].key, {0: vector("not this one"), 1: [float("nan")] * 384})
        for unit, _, plist in chain:
            store.put_piece_vectors(NS, unit.key, {j: filled[unit.key, j] for j in range(len(plist))})
        store.put_piece_vectors(NS, "no-such-unit", {0: filled[chain[0][0].key, 0]})
        expected = [[p.embedding if p.embedding is not None else filled[unit.key, p.index] for p in plist]
                    for unit, _, plist in chain]
        for s in [store, backend.open()] if backend.persistent else [store]:
            got = [s.pieces(NS, unit.key) for unit, _, _ in chain]
            assert [[p.text for p in g] for g in got] == [[p.text for p in t[2]] for t in chain]
            for g, e in zip([*got, list(s.iter_pieces(NS))], [*expected, [v for u in expected for v in u]]):
                assert len(g) == len(e)
                for piece, vec in zip(g, e, strict=True):
                    assert piece.embedding is not None and piece.embedding.dtype == np.float32
                    np.testing.assert_array_equal(piece.embedding, vec)

    def test_index_snapshots_are_kept_per_namespace_and_forgotten_with_their_units(self, backend):
        """The optional ``IndexSnapshots`` capability: one blob per namespace, exact bytes, replaced
        on put, and deleted by any forgetting (it holds the terms of every unit it covers)."""
        if not isinstance(backend.first, IndexSnapshots):
            pytest.skip(f"{type(backend.first).__name__} keeps no index snapshot (the index is rebuilt on open)")
        _check_namespace_blobs(backend, "get_index_snapshot", "put_index_snapshot")

    def test_request_states_are_kept_per_namespace_and_forgotten_with_their_units(self, backend):
        """The optional ``RequestStates`` capability: a thread's previous cache-stable request,
        one blob per namespace, exact bytes, replaced on put, read by a reopened store, and
        deleted by any forgetting (its memory message holds units' text)."""
        if not isinstance(backend.first, RequestStates):
            pytest.skip(f"{type(backend.first).__name__} keeps no request state (each process keeps its own)")
        _check_namespace_blobs(backend, "get_request_state", "put_request_state")

    def test_a_store_reopens_from_its_own_url(self, backend):
        """``store_url(store)`` names the same data: an adapter can serialise any store as a string."""
        store = backend.first
        if getattr(store, "url", None) is None:
            pytest.skip(f"{type(store).__name__} is built on a host object and has no URL")
        chain = make_chain("url", 3)
        write_all(store, NS, chain)
        again = open_store(store_url(store))
        try:
            assert [n.unit_key for n in again.notes(NS)] == [t[0].key for t in chain]
            assert store_url(again) == store_url(store)
        finally:
            if again is not store and hasattr(again, "close"):
                again.close()

    def test_merged_records_are_listed_in_one_read(self, backend):
        """The optional ``MergedListing`` capability returns exactly what ``get_merged`` would."""
        store = backend.first
        if not isinstance(store, MergedListing):
            pytest.skip(f"{type(store).__name__} reads merged records one by one")
        _, keys, (low_a, low_b, high) = _build_forgettable(store, NS)
        listed = {m.key: m for m in store.merged_records(NS)}
        assert listed == {m.key: store.get_merged(NS, m.key) for m in (low_a, low_b, high)}
        assert store.merged_records("tenant-z") == []
        store.delete_unit(NS, keys[2])
        assert {m.key for m in store.merged_records(NS)} == {low_b.key}

    def test_keys_and_notes_from_a_position_are_those_of_notes(self, backend):
        """The optional ``NotesFrom`` capability: the keys in write order and the notes from a
        position on are exactly what ``notes()`` returns, links and vectors included."""
        store = backend.first
        if not isinstance(store, NotesFrom):
            pytest.skip(f"{type(store).__name__} reads every note on open")
        chain = make_chain("nf", 5, piece_vectors=True)
        write_all(store, NS, chain)
        write_all(store, "tenant-z", make_chain("other", 2))
        notes = store.notes(NS)
        for start in (0, 2, 5, 9):
            keys, rest = store.keys_and_notes_from(NS, start)
            assert keys == [n.unit_key for n in notes] == [t[0].key for t in chain]
            assert [n.to_dict(embedding=False) for n in rest] == [n.to_dict(embedding=False) for n in notes[start:]]
            for got, want in zip(rest, notes[start:], strict=True):
                np.testing.assert_array_equal(got.embedding, want.embedding)
        assert store.keys_and_notes_from("tenant-y", 0) == ([], [])
        store.delete_unit(NS, chain[1][0].key)
        keys, rest = store.keys_and_notes_from(NS, 1)
        assert keys == [chain[i][0].key for i in (0, 2, 3, 4)] == [n.unit_key for n in store.notes(NS)]
        assert [n.unit_key for n in rest] == keys[1:]

    def test_namespace_versions_change_with_every_unit_written_or_forgotten(self, backend):
        """The optional ``NamespaceVersions`` capability: the token an instance compares to see
        another instance's writes and deletions."""
        store = backend.first
        if not isinstance(store, NamespaceVersions):
            pytest.skip(f"{type(store).__name__} has no namespace versions")
        chain = make_chain("ver", 4)
        seen = [store.namespace_version(NS)]
        for triple in chain[:3]:
            store.write_unit(NS, *triple)
            seen.append(store.namespace_version(NS))
        other = store.namespace_version("tenant-z")
        store.write_unit(NS, *chain[0])  # already stored: no change
        store.put_merged(NS, make_merged([t[0].key for t in chain[:2]], "m"))
        assert store.namespace_version(NS) == seen[-1]
        store.delete_unit(NS, chain[0][0].key)  # not the newest: only the deletion shows it
        seen.append(store.namespace_version(NS))
        store.delete_namespace(NS)
        seen.append(store.namespace_version(NS))
        store.write_unit(NS, *chain[3])
        seen.append(store.namespace_version(NS))
        empty = {seen[0], seen[-2]}  # no unit at all (never written, all forgotten): may be equal
        assert all(a != b for a, b in zip(seen, seen[1:])), seen
        held = [v for i, v in enumerate(seen) if i not in (0, len(seen) - 2)]
        assert len(set(held)) == len(held) and not empty & set(held), seen
        assert store.namespace_version("tenant-z") == other


def _check_namespace_blobs(backend: StoreBackend, get_name: str, put_name: str) -> None:
    """A capability that keeps one blob per namespace (``get_name`` / ``put_name``): exact bytes,
    replaced on put, read by a reopened store, deleted with any unit or the namespace."""
    store = backend.first
    get, put = getattr(store, get_name), getattr(store, put_name)
    chain = make_chain("blob", 3)
    write_all(store, NS, chain)
    write_all(store, "tenant-z", make_chain("other", 1))
    assert get(NS) is None
    blob = bytes(range(256)) + CANARY.encode()
    put(NS, blob)
    assert get(NS) == blob
    assert get("tenant-z") is None
    put(NS, b"second " + CANARY.encode())
    assert get(NS) == b"second " + CANARY.encode()
    if backend.persistent:
        assert getattr(backend.open(), get_name)(NS) == b"second " + CANARY.encode()
    put("tenant-z", b"z")
    assert store.delete_unit(NS, chain[1][0].key)
    assert get(NS) is None
    assert CANARY not in backend.raw_dump(store)
    assert get("tenant-z") == b"z"
    put("tenant-z", CANARY.encode())
    assert store.delete_namespace("tenant-z") == 1
    assert get("tenant-z") is None
    assert CANARY not in backend.raw_dump(store)
