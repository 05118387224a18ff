"""AsyncPostgresStore against a real PostgreSQL server: the conformance guarantees, awaited.

Round trip, write-once, forks, memoised merges, isolation, forgetting (with a raw SQL check
that no deleted text remains), namespace validation, migrations racing, many asyncio tasks
appending to one namespace, and the sync and async stores sharing one schema. Needs the
server of ``.ci/services.sh`` (skipped with the reason without it, failing under CI=true).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import uuid
from collections.abc import Coroutine, Iterator
from typing import Any

import numpy as np
import pytest
from conftest import _postgres_dump

from flexamem_core.stores import ForgettingStore, NamespaceError
from flexamem_core.stores.postgres import (
    SCHEMA_VERSION,
    AsyncPostgresStore,
    PostgresStore,
    SchemaVersionError,
)
from flexamem_core.stores.url import StoreURLError
from flexamem_core.testing.storekit import make_chain, make_merged, make_unit, snapshot
from tests.services import postgres_url

PoolClosed = pytest.importorskip("psycopg_pool", reason="the postgres extra is not installed").PoolClosed

NS = "tenant-a/thread-1"
CANARY = "zebracanary7781"
TENANTS = ["tenant-a/thread-1", "tenant-a/thread-2", "tenant-b/thread-1", "tenant-b", "c:d@e.f_g-h"]


@dataclasses.dataclass
class Database:
    """A fresh PostgreSQL schema for one test, dropped afterwards."""

    base: str
    schema: str

    @property
    def url(self) -> str:
        sep = "&" if "?" in self.base else "?"
        return f"{self.base}{sep}schema={self.schema}"

    def raw_dump(self) -> str:
        """Every row of every table of the schema as text (what a raw SQL query can see)."""
        return _postgres_dump(self.base, self.schema)(None)


@pytest.fixture
def db() -> Iterator[Database]:
    base = postgres_url()
    d = Database(base, f"ta_{uuid.uuid4().hex[:12]}")
    try:
        yield d
    finally:
        import psycopg
        from psycopg import sql

        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(d.schema)))


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


async def write_all(store: AsyncPostgresStore, namespace: str, triples) -> list[bool]:
    return [await store.write_unit(namespace, *t) for t in triples]


async def asnapshot(store: AsyncPostgresStore, namespace: str) -> dict:
    """The async twin of ``storekit.snapshot``: everything a render could read."""
    notes = await store.notes(namespace)
    return {
        "notes": [n.to_dict() for n in notes],
        "parents": await store.parents(namespace),
        "pieces": [p.to_dict() for p in await store.iter_pieces(namespace)],
        "units": {n.unit_key: (await store.get_unit(namespace, n.unit_key)).to_dict() for n in notes},
    }


def test_every_store_and_forgetting_method_is_a_coroutine():
    names = [n for n in dir(ForgettingStore) if not n.startswith("_") and callable(getattr(ForgettingStore, n))]
    assert {"write_unit", "get_merged", "put_merged", "delete_unit", "delete_namespace"} <= set(names)
    for name in names:
        assert inspect.iscoroutinefunction(getattr(AsyncPostgresStore, name)), name


def test_round_trip_is_exact(db):
    async def body():
        async with AsyncPostgresStore(db.base, schema=db.schema) as store:
            chain = make_chain("rt", 5, texts={2: "naïve 日本語 \"quotes\" \\ back\tslash\x00nul"})
            assert await write_all(store, NS, chain) == [True] * 5
            notes = await store.notes(NS)
            assert [n.unit_key for n in notes] == [t[0].key for t in chain]
            for note, (unit, expected, pieces) in zip(notes, chain, strict=True):
                assert note == expected
                assert note.embedding.dtype == np.float32
                np.testing.assert_array_equal(note.embedding, expected.embedding)
                assert (await store.get_unit(NS, unit.key)).to_dict() == unit.to_dict()
                assert await store.pieces(NS, unit.key) == pieces
                assert await store.has_unit(NS, unit.key)
            assert await store.iter_pieces(NS) == [p for t in chain for p in t[2]]
            assert await store.parents(NS) == {t[0].key: t[0].parent for t in chain}
            assert await store.namespaces() == [NS]
            assert not await store.has_unit(NS, "no-such-key")
            assert await store.pieces(NS, "no-such-key") == []
            assert await store.get_merged(NS, "no-such-key") is None
            assert await store.notes("nobody") == [] and await store.parents("nobody") == {}
            with pytest.raises(KeyError):
                await store.get_unit(NS, "no-such-key")

    run(body())


def test_rewrite_is_a_no_op(db):
    async def body():
        store = await AsyncPostgresStore.open(db.url)
        try:
            chain = make_chain("wo", 3)
            await write_all(store, NS, chain)
            before = await asnapshot(store, NS)
            assert await write_all(store, NS, chain) == [False] * 3
            unit, note, pieces = chain[1]
            rewritten = dataclasses.replace(note, record="rewritten!")
            assert await store.write_unit(NS, unit, rewritten, pieces[:1]) is False
            assert await asnapshot(store, NS) == before
        finally:
            await store.close()

    run(body())
    assert "rewritten!" not in db.raw_dump()


def test_message_edited_under_same_id_forks_a_new_unit(db):
    async def body():
        async with AsyncPostgresStore(db.base, schema=db.schema) as store:
            root = make_unit("ed", 1, None)
            original = make_unit("ed", 2, root[0].key, text="ls printed a.txt", msg_id="msg-7")
            edited = make_unit("ed", 2, root[0].key, text="ls printed b.txt", msg_id="msg-7")
            assert original[0].key != edited[0].key
            child = make_unit("ed", 3, edited[0].key)
            assert await write_all(store, NS, [root, original, edited, child]) == [True] * 4
            parents = await store.parents(NS)
            assert parents[original[0].key] == parents[edited[0].key] == root[0].key
            assert parents[child[0].key] == edited[0].key
            assert (await store.get_unit(NS, original[0].key)).raw != (await store.get_unit(NS, edited[0].key)).raw
            assert [n.unit_key for n in await store.notes(NS)] == [
                t[0].key for t in (root, original, edited, child)]

    run(body())


def test_merged_records_are_memoised_once(db):
    async def body():
        async with AsyncPostgresStore(db.base, schema=db.schema) as store:
            chain = make_chain("mr", 4)
            await write_all(store, NS, chain)
            keys = [t[0].key for t in chain]
            first = make_merged(keys[:2], "first merge")
            await store.put_merged(NS, first)
            await store.put_merged(NS, dataclasses.replace(first, text="second text"))
            assert await store.get_merged(NS, first.key) == first
            upper = make_merged([first.key, keys[2]], "merge of a merge", level=2)
            await store.put_merged(NS, upper)
            assert await store.get_merged(NS, upper.key) == upper
            dangling = make_merged([keys[3], "never-stored"], "covers a unit that is not stored")
            await store.put_merged(NS, dangling)
            assert await store.get_merged(NS, dangling.key) is None

    run(body())
    assert "second text" not in db.raw_dump()


def test_canary_in_one_tenant_is_invisible_from_every_other(db):
    async def body():
        async with AsyncPostgresStore(db.base, schema=db.schema) as store:
            chains = {ns: make_chain(ns.replace("/", "-"), 3) for ns in TENANTS}
            planted = make_chain("secret", 3, texts={1: f"the password is {CANARY}"})
            shared = make_unit("shared", 1, None)
            for ns, chain in chains.items():
                await write_all(store, ns, chain)
            await write_all(store, TENANTS[0], planted)
            await store.write_unit(TENANTS[0], *shared)
            assert await store.write_unit(TENANTS[2], *shared) is True  # keys are per namespace
            secret = make_merged([t[0].key for t in planted], f"merged: {CANARY}")
            await store.put_merged(TENANTS[0], secret)
            await store.put_merged(TENANTS[2], secret)  # covers units tenant b does not hold: refused
            planted_key = planted[1][0].key

            assert any(CANARY in p.text for p in await store.iter_pieces(TENANTS[0]))
            for ns in TENANTS[1:]:
                assert all(CANARY not in p.text for p in await store.iter_pieces(ns))
                assert all(CANARY not in str(n.to_dict()) for n in await store.notes(ns))
                assert await store.get_merged(ns, secret.key) is None
                assert not await store.has_unit(ns, planted_key)
                assert planted_key not in await store.parents(ns)
                assert await store.pieces(ns, planted_key) == []
                with pytest.raises(KeyError):
                    await store.get_unit(ns, planted_key)
                assert {n.unit_key for n in await store.notes(ns)} <= {
                    t[0].key for t in chains[ns]} | {shared[0].key}
            assert sorted(await store.namespaces()) == sorted(TENANTS)
            assert await store.delete_unit(TENANTS[0], shared[0].key)
            assert await store.has_unit(TENANTS[2], shared[0].key)  # the other tenant's copy stays

    run(body())


async def _build_forgettable(store: AsyncPostgresStore, ns: str):
    chain = make_chain("fg", 6, texts={2: f"secret output {CANARY}"})
    await write_all(store, ns, chain)
    keys = [t[0].key for t in chain]
    low_a = make_merged(keys[0:3], f"merged 1-3 mentions {CANARY}")
    low_b = make_merged(keys[3:5], "merged 4-5")
    high = make_merged([low_a.key, low_b.key], f"merged of merged {CANARY}", level=2)
    for m in (low_a, low_b, high):
        await store.put_merged(ns, m)
    return chain, keys, (low_a, low_b, high)


def test_forgetting_a_unit_removes_everything_derived_from_it(db):
    async def body():
        async with AsyncPostgresStore(db.base, schema=db.schema) as store:
            chain, keys, (low_a, low_b, high) = await _build_forgettable(store, NS)
            other = make_chain("keep", 2)
            await write_all(store, "tenant-z", other)
            assert [n.unit_key for n in await store.notes(NS) if keys[2] in n.links] == keys[3:6]
            assert CANARY in db.raw_dump()

            assert await store.delete_unit(NS, keys[2]) is True
            assert await store.delete_unit(NS, keys[2]) is False
            assert not await store.has_unit(NS, keys[2])
            with pytest.raises(KeyError):
                await store.get_unit(NS, keys[2])
            assert await store.pieces(NS, keys[2]) == []
            notes = await store.notes(NS)
            assert [n.unit_key for n in notes] == keys[:2] + keys[3:]
            for note, (_, original, _) in zip(notes, chain[:2] + chain[3:], strict=True):
                assert note.links == tuple(k for k in original.links if k != keys[2])
            assert keys[2] not in await store.parents(NS)
            assert all(p.unit_key != keys[2] for p in await store.iter_pieces(NS))
            assert await store.get_merged(NS, low_a.key) is None  # covered it
            assert await store.get_merged(NS, high.key) is None  # covered it through low_a
            assert await store.get_merged(NS, low_b.key) == low_b
            assert (await asnapshot(store, "tenant-z"))["parents"] == {t[0].key: t[0].parent for t in other}

    run(body())
    assert CANARY not in db.raw_dump()  # no raw SQL query returns the forgotten text


def test_forgetting_a_namespace(db):
    async def body():
        async with AsyncPostgresStore(db.base, schema=db.schema) as store:
            for ns in ("acme/t1", "acme/t2", "other"):
                await _build_forgettable(store, ns)
            assert await store.delete_namespace("acme/t1") == 6
            assert await store.notes("acme/t1") == [] and await store.iter_pieces("acme/t1") == []
            assert await store.get_merged("acme/t1", make_merged(["x"], "y").key) is None
            assert await store.delete_namespace("acme/t1") == 0
            assert sorted(await store.namespaces()) == ["acme/t2", "other"]
            assert len(await store.notes("acme/t2")) == 6
            assert await store.delete_namespace("acme/t2") == 6
            assert await store.delete_namespace("other") == 6
            assert await store.namespaces() == []

    run(body())
    assert CANARY not in db.raw_dump()


@pytest.mark.parametrize("bad", ["", "../etc", "x'; DROP TABLE units; --", "a" * 201, "ns\x00", None])
def test_bad_namespaces_are_rejected_before_any_query(db, bad):
    async def body():
        async with AsyncPostgresStore(db.base, schema=db.schema, max_size=1) as store:
            await write_all(store, NS, make_chain("ok", 1))
            unit, note, pieces = make_unit("bad", 1, None)
            merged = make_merged([unit.key], "m")
            calls = [lambda: store.write_unit(bad, unit, note, pieces), lambda: store.notes(bad),
                     lambda: store.has_unit(bad, "k"), lambda: store.get_unit(bad, "k"),
                     lambda: store.parents(bad), lambda: store.iter_pieces(bad),
                     lambda: store.pieces(bad, "k"), lambda: store.get_merged(bad, "k"),
                     lambda: store.put_merged(bad, merged),
                     lambda: store.delete_unit(bad, "k"), lambda: store.delete_namespace(bad)]
            for call in calls:
                with pytest.raises(NamespaceError):
                    await call()
            assert len(await store.notes(NS)) == 1  # nothing was harmed

    run(body())


PIECES = 8  # longer write transactions: a wider window for a reader to catch a bad order


def test_many_tasks_appending_store_each_unit_once_in_one_order(db):
    writers, own = 60, 2
    shared = make_chain("shared", 4, n_pieces=PIECES)
    chains = [make_chain(f"w{i}", own, n_pieces=PIECES) for i in range(writers)]

    async def writer(store: AsyncPostgresStore, i: int) -> list[bool]:
        wrote = []
        for j, triple in enumerate(chains[i]):
            wrote.append(await store.write_unit(NS, *triple))
            if j == 0:  # every writer also tries the shared units: only one may store each
                wrote += [await store.write_unit(NS, *t) for t in shared[i % 2:]]
        return wrote

    async def body():
        async with AsyncPostgresStore(db.base, schema=db.schema, max_size=6) as store, \
                AsyncPostgresStore(db.base, schema=db.schema, max_size=4) as watcher:
            done = asyncio.Event()
            seen: list[list[str]] = []

            async def reader() -> None:  # on its own pool, so writers never starve it
                while not done.is_set():
                    seen.append([n.unit_key for n in await watcher.notes(NS)])
                    seen.append(list(await watcher.parents(NS)))

            watching = asyncio.gather(*(reader() for _ in range(4)))
            results = await asyncio.gather(*(writer(store, i) for i in range(writers)))
            done.set()
            await watching
            final = [n.unit_key for n in await store.notes(NS)]
            return results, seen, final, await store.parents(NS), await store.iter_pieces(NS)

    results, seen, final, parents, pieces = run(body())
    expected = {t[0].key for c in chains for t in c} | {t[0].key for t in shared}
    assert len(final) == len(set(final)) == len(expected) and set(final) == expected  # each once
    assert sum(r.count(True) for r in results) == len(expected)  # each stored by exactly one writer
    for chain in chains:  # a writer's own units keep its order
        positions = [final.index(t[0].key) for t in chain]
        assert positions == sorted(positions)
    assert list(parents) == final  # one order everywhere: notes, units and pieces
    assert [p.unit_key for p in pieces][::PIECES] == final
    assert len(seen) > 10
    for snap in seen:  # readers only ever see the history grow at its end
        assert snap == final[:len(snap)]


def test_sync_and_async_stores_see_each_others_writes(db):
    chain = make_chain("both", 6)
    keys = [t[0].key for t in chain]
    sync = PostgresStore(db.base, schema=db.schema)
    try:
        assert [sync.write_unit(NS, *t) for t in chain[:3]] == [True] * 3

        async def body():
            async with AsyncPostgresStore(db.base, schema=db.schema) as store:
                assert [n.unit_key for n in await store.notes(NS)] == keys[:3]
                assert await write_all(store, NS, chain[2:]) == [False, True, True, True]
                merged = make_merged(keys[:2], "merged by async")
                await store.put_merged(NS, merged)
                assert sync.get_merged(NS, merged.key) == merged
                assert sync.write_unit(NS, *chain[5]) is False
                sync.put_merged(NS, make_merged(keys[3:5], "merged by sync"))
                assert (await store.get_merged(NS, make_merged(keys[3:5], "x").key)).text == "merged by sync"
                assert await store.delete_unit(NS, keys[0]) is True
                assert not sync.has_unit(NS, keys[0]) and sync.get_merged(NS, merged.key) is None
                assert sync.delete_unit(NS, keys[1]) is True
                got_keys, rest = await store.keys_and_notes_from(NS, 1)  # NotesFrom, the async twin
                want_keys, want = sync.keys_and_notes_from(NS, 1)
                assert got_keys == want_keys == keys[2:]
                assert [n.to_dict() for n in rest] == [n.to_dict() for n in want] != []
                return await asnapshot(store, NS)

        from_async = run(body())
        assert from_async == snapshot(sync, NS)
        assert [n["unit_key"] for n in from_async["notes"]] == keys[2:]
    finally:
        sync.close()


def test_many_stores_opening_at_once_migrate_once(db):
    async def body():
        stores = await asyncio.gather(*(AsyncPostgresStore.open(db.url) for _ in range(6)))
        for s in stores:
            await s.close()

    run(body())
    import psycopg
    from psycopg import sql

    with psycopg.connect(db.base) as conn:
        versions = conn.execute(sql.SQL("SELECT version FROM {}.schema_version").format(
            sql.Identifier(db.schema))).fetchall()
        assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
        conn.execute(sql.SQL("INSERT INTO {}.schema_version VALUES (%s)").format(
            sql.Identifier(db.schema)), (SCHEMA_VERSION + 1,))

    async def newer():
        with pytest.raises(SchemaVersionError, match="upgrade flexamem"):
            await AsyncPostgresStore.open(db.url)

    run(newer())


def test_url_options_and_closing(db):
    with pytest.raises(StoreURLError, match="pool_max must be an integer"):
        run(AsyncPostgresStore.open(f"{db.url}&pool_max=many"))
    with pytest.raises(ValueError, match="invalid PostgreSQL schema name"):
        run(AsyncPostgresStore.open(f"{db.base}?schema=Bad-Name"))

    async def body():
        store = await AsyncPostgresStore.open(f"{db.url}&pool_min=1&pool_max=2")
        assert store.schema == db.schema
        await store.write_unit(NS, *make_unit("url", 1, None))
        await store.close()
        await store.close()  # closing twice is harmless
        with pytest.raises(PoolClosed):
            await store.notes(NS)

    run(body())
    assert "output of step 1 in url" in db.raw_dump()  # written into the schema the URL named


def test_a_schema_of_version_2_gains_piece_vectors_in_place(db):
    """Pieces written before piece vectors keep reading (without one); new ones carry theirs."""
    import psycopg
    from psycopg import sql

    sync = PostgresStore(db.base, schema=db.schema)
    old = make_chain("v2", 2)
    try:
        for t in old:
            sync.write_unit(NS, *t)
    finally:
        sync.close()
    with psycopg.connect(db.base, autocommit=True) as conn:
        s = sql.Identifier(db.schema)
        conn.execute(sql.SQL("ALTER TABLE {}.pieces DROP COLUMN embedding").format(s))
        conn.execute(sql.SQL("DROP INDEX {}.units_chain").format(s))
        conn.execute(sql.SQL("DROP INDEX {}.notes_keys").format(s))
        conn.execute(sql.SQL("DELETE FROM {}.schema_version WHERE version > 2").format(s))
    upgraded = PostgresStore(db.base, schema=db.schema)
    try:
        assert all(p.embedding is None for p in upgraded.iter_pieces(NS))
        new = make_chain("v3", 1, parent=old[-1][0].key, first_step=3, piece_vectors=True)[0]
        assert upgraded.write_unit(NS, *new)
        for got, expected in zip(upgraded.pieces(NS, new[0].key), new[2], strict=True):
            np.testing.assert_array_equal(got.embedding, expected.embedding)
    finally:
        upgraded.close()
    with psycopg.connect(db.base) as conn:
        versions = conn.execute(sql.SQL("SELECT version FROM {}.schema_version ORDER BY version").format(
            sql.Identifier(db.schema))).fetchall()
    assert versions == [(v,) for v in range(1, SCHEMA_VERSION + 1)]
