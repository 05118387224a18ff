"""LangGraphBaseStore behaves like flexamem_core.stores.InMemoryStore (the reference backend)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest
from flexamem_langgraph import LangGraphBaseStore
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore as LangGraphInMemoryStore

from flexamem_core import InMemoryStore, Message
from flexamem_core.model.schema import MergedRecord, Note, Piece, Unit
from flexamem_core.stores import NamespaceError


def key_of(n: int) -> str:
    return f"unit-{n}-{hashlib.sha256(f'step {n}'.encode()).hexdigest()[:8]}"


def make_unit(n: int, parent: str | None = None, text: str | None = None,
              links: tuple[str, ...] = ()) -> tuple[Unit, Note, list[Piece]]:
    body = text if text is not None else f"step {n}: ran tool_{n} and got value {n * 13}"
    key = key_of(n) if text is None else f"unit-{n}-{hashlib.sha256(body.encode()).hexdigest()[:8]}"
    unit = Unit(key=key, kind="agent", messages=(Message(role="assistant", content=body, id=f"m{n}"),),
                raw=body, tokens=len(body.split()), parent=parent, first_step=n)
    vec = np.zeros(4, dtype=np.float32)
    vec[n % 4] = 1.0
    note = Note(unit_key=key, record=f"record {n}", record_tokens=2, keywords=(f"k{n}",), tags=("agent",),
                description=f"d{n}", embedding=vec, links=links, raw_tokens=unit.tokens, first_step=n)
    pieces = [Piece(unit_key=key, index=i, text=f"{body} / piece {i}", tokens=3, block=0,
                    starts_block=i == 0, label=f"step {n}") for i in range(2)]
    return unit, note, pieces


def backends() -> list[Any]:
    return [InMemoryStore(), LangGraphBaseStore(LangGraphInMemoryStore())]


def observe(store: Any, namespaces: list[str]) -> dict[str, Any]:
    """Everything a reader can see, as plain data."""
    seen: dict[str, Any] = {"namespaces": sorted(store.namespaces())}
    for ns in namespaces:
        notes = store.notes(ns)
        seen[ns] = {
            "notes": [n.to_dict() for n in notes],
            "parents": store.parents(ns),
            "units": [store.get_unit(ns, n.unit_key).to_dict() for n in notes],
            "pieces": [[p.to_dict() for p in store.pieces(ns, n.unit_key)] for n in notes],
            "all_pieces": [p.to_dict() for p in store.iter_pieces(ns)],
        }
    return seen


@pytest.mark.parametrize("store", backends(), ids=["core-memory", "langgraph-basestore"])
def test_write_once_order_and_round_trip(store: Any) -> None:
    units = [make_unit(i) for i in range(5)]
    for i, (u, n, p) in enumerate(units):
        assert store.write_unit("thread.1", u, n, p) is True
        assert store.has_unit("thread.1", u.key)
        assert store.write_unit("thread.1", u, n, p) is False, i
    # A second write of the same key with different content is a no-op.
    u0, n0, _ = units[0]
    altered = Note(**{**n0.__dict__, "record": "rewritten"})
    assert store.write_unit("thread.1", u0, altered, []) is False
    assert store.notes("thread.1")[0].record == "record 0"
    assert [n.unit_key for n in store.notes("thread.1")] == [u.key for u, _, _ in units]
    assert store.get_unit("thread.1", u0.key) == u0
    assert [p.to_dict() for p in store.pieces("thread.1", u0.key)] == [p.to_dict() for p in units[0][2]]
    assert len(list(store.iter_pieces("thread.1"))) == 10
    assert store.pieces("thread.1", "missing") == []
    with pytest.raises(KeyError, match="no unit"):
        store.get_unit("thread.1", "missing")


@pytest.mark.parametrize("store", backends(), ids=["core-memory", "langgraph-basestore"])
def test_namespaces_are_isolated_and_validated(store: Any) -> None:
    u, n, p = make_unit(1)
    store.write_unit("a", u, n, p)
    assert store.notes("b") == [] and not store.has_unit("b", u.key) and store.parents("b") == {}
    assert sorted(store.namespaces()) == ["a"]
    store.write_unit("b.c", *make_unit(2))
    assert sorted(store.namespaces()) == ["a", "b.c"]
    with pytest.raises(NamespaceError):
        store.notes("bad name!")
    with pytest.raises(NamespaceError):
        store.write_unit("", u, n, p)


@pytest.mark.parametrize("store", backends(), ids=["core-memory", "langgraph-basestore"])
def test_merged_records_are_memoised_once(store: Any) -> None:
    for i in (1, 2):
        store.write_unit("a", *make_unit(i))
    assert store.get_merged("a", "m1") is None
    first = MergedRecord(key="m1", covers=(key_of(1), key_of(2)), text="merged", tokens=1, level=1)
    store.put_merged("a", first)
    store.put_merged("a", MergedRecord(key="m1", covers=first.covers, text="other", tokens=1, level=1))
    assert store.get_merged("a", "m1") == first
    assert store.get_merged("b", "m1") is None
    # A merge over a unit that is not stored is stale and not kept.
    store.put_merged("a", MergedRecord(key="m2", covers=(key_of(1), key_of(9)), text="x", tokens=1, level=1))
    assert store.get_merged("a", "m2") is None


@pytest.mark.parametrize("store", backends(), ids=["core-memory", "langgraph-basestore"])
def test_forgetting_removes_unit_links_and_covering_merges(store: Any) -> None:
    for i in range(4):
        store.write_unit("t", *make_unit(i, links=tuple(key_of(j) for j in range(i))))
    store.write_unit("other", *make_unit(0))
    lower = MergedRecord(key="m1", covers=(key_of(0), key_of(1)), text="m1", tokens=1, level=1)
    upper = MergedRecord(key="m2", covers=("m1", key_of(2)), text="m2", tokens=1, level=2)
    kept = MergedRecord(key="m3", covers=(key_of(2), key_of(3)), text="m3", tokens=1, level=1)
    for m in (lower, upper, kept):
        store.put_merged("t", m)
    assert store.delete_unit("t", key_of(1)) is True
    assert store.delete_unit("t", key_of(1)) is False
    assert not store.has_unit("t", key_of(1)) and store.pieces("t", key_of(1)) == []
    assert all(key_of(1) not in n.links for n in store.notes("t"))
    assert [n.unit_key for n in store.notes("t")] == [key_of(0), key_of(2), key_of(3)]
    assert store.get_merged("t", "m1") is None and store.get_merged("t", "m2") is None
    assert store.get_merged("t", "m3") == kept
    assert store.delete_namespace("t") == 3
    assert store.notes("t") == [] and store.namespaces() == ["other"]
    assert store.has_unit("other", key_of(0))


def test_prefix_and_type_are_checked() -> None:
    with pytest.raises(TypeError):
        LangGraphBaseStore({})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reserves"):
        LangGraphBaseStore(LangGraphInMemoryStore(), prefix=("langgraph",))
    with pytest.raises(ValueError, match="prefix"):
        LangGraphBaseStore(LangGraphInMemoryStore(), prefix=("a.b",))


_op = st.tuples(st.sampled_from(["write", "write", "merge", "delete", "drop"]),
                st.sampled_from(["t1", "t.2", "u/3"]), st.integers(0, 6))


@settings(max_examples=60, deadline=None)
@given(st.lists(_op, max_size=25))
def test_property_same_operations_same_observations(ops: list[tuple[str, str, int]]) -> None:
    reference, backend = backends()
    for kind, ns, n in ops:
        results = []
        for store in (reference, backend):
            if kind == "write":
                u, note, pieces = make_unit(n, parent=key_of(n - 1) if n else None,
                                            links=tuple(key_of(j) for j in range(max(0, n - 2), n)))
                results.append(store.write_unit(ns, u, note, pieces))
            elif kind == "merge":
                store.put_merged(ns, MergedRecord(key=f"m{n}", covers=(key_of(n), key_of(n + 1)),
                                                  text=f"merge {n}", tokens=2, level=1))
            elif kind == "delete":
                results.append(store.delete_unit(ns, key_of(n)))
            else:
                results.append(store.delete_namespace(ns))
        assert results[:1] == results[1:]
    names = ["t1", "t.2", "u/3"]
    assert observe(backend, names) == observe(reference, names)
    for ns in names:
        for n in range(7):
            assert backend.get_merged(ns, f"m{n}") == reference.get_merged(ns, f"m{n}")
