"""FlexAMemSaver: a checkpointer that ingests each saved thread into FlexA-Mem.

- LangGraph's own conformance suite (``langgraph-checkpoint-conformance``) passes through the
  wrapper exactly as it passes on the wrapped saver: InMemorySaver, SQLite and PostgreSQL
  (``langgraph-checkpoint-postgres`` on the server of ``.ci/services.sh``, each run in a schema of
  its own), through the async API and the sync one, and a saver with the extended capabilities
  (copy, prune, delete by run);
- a ``create_agent`` run writes the thread's units when each checkpoint is put, before the next
  model call renders, and the model's requests are the same as with a plain InMemorySaver;
- an ingestion that fails leaves the checkpoint saved and logs one WARNING.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from flexamem_langgraph import FlexAMemMiddleware, FlexAMemSaver, LangGraphBaseStore, namespace_for_thread, to_core
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import Capability
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.sqlite import SqliteStore

from flexamem_core import FlexAMem
from tests.services import postgres_url

# -- the conformance suite -------------------------------------------------------------------


class ExtendedInMemorySaver(InMemorySaver):
    """InMemorySaver plus the suite's extended capabilities (InMemorySaver and SQLite have none),
    so the wrapper's delegation of ``copy_thread``, ``prune`` and ``delete_for_runs`` is run too."""

    def _drop(self, thread_id: str, ns: str, checkpoint_id: str) -> None:
        del self.storage[thread_id][ns][checkpoint_id]
        self.writes.pop((thread_id, ns, checkpoint_id), None)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        for ns, checkpoints in self.storage.get(source_thread_id, {}).items():
            self.storage[target_thread_id][ns].update(checkpoints)
        for (thread, ns, cid), writes in list(self.writes.items()):
            if thread == source_thread_id:
                self.writes[(target_thread_id, ns, cid)] = dict(writes)
        for (thread, ns, channel, version), blob in list(self.blobs.items()):
            if thread == source_thread_id:
                self.blobs[(target_thread_id, ns, channel, version)] = blob

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            for ns, checkpoints in list(self.storage.get(thread_id, {}).items()):
                for cid in sorted(checkpoints)[:-1]:
                    self._drop(thread_id, ns, cid)
                for cid in checkpoints:
                    checkpoint, metadata, _parent = checkpoints[cid]
                    checkpoints[cid] = (checkpoint, metadata, None)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        runs = set(run_ids)
        for thread_id, namespaces in list(self.storage.items()):
            for ns, checkpoints in list(namespaces.items()):
                for cid, (_c, metadata, _p) in list(checkpoints.items()):
                    if self.serde.loads_typed(metadata).get("run_id") in runs:
                        self._drop(thread_id, ns, cid)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)


class SyncAPI(BaseCheckpointSaver):
    """The suite calls a saver's async API; this runs each call on the sync API, in a worker
    thread (as a sync graph's background saves do), so the sync methods are checked too."""

    def __init__(self, saver: BaseCheckpointSaver) -> None:
        self.saver = saver

    async def aput(self, *args: Any) -> RunnableConfig:
        return await asyncio.to_thread(self.saver.put, *args)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        await asyncio.to_thread(self.saver.put_writes, config, writes, task_id, task_path)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.saver.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, **kwargs: Any) -> AsyncIterator[CheckpointTuple]:
        for item in await asyncio.to_thread(lambda: list(self.saver.list(config, **kwargs))):
            yield item

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.saver.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.saver.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.saver.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], **kwargs: Any) -> None:
        await asyncio.to_thread(self.saver.prune, thread_ids, **kwargs)


def _sqlite_saver() -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))


@contextlib.asynccontextmanager
async def _postgres_saver(api: str) -> AsyncIterator[BaseCheckpointSaver]:
    """langgraph-checkpoint-postgres's saver (``PostgresSaver`` for the sync API, else
    ``AsyncPostgresSaver``) on the test server, in a schema of its own, dropped after."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    url = postgres_url()
    schema = f"saver_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    conninfo = psycopg.conninfo.make_conninfo(url, options=f"-c search_path={schema}")
    try:
        if api == "sync":
            with PostgresSaver.from_conn_string(conninfo) as saver:
                saver.setup()
                yield saver
        else:
            async with AsyncPostgresSaver.from_conn_string(conninfo) as asaver:
                await asaver.setup()
                yield asaver
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _postgres_class(api: str) -> type[BaseCheckpointSaver]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    return PostgresSaver if api == "sync" else AsyncPostgresSaver


#: name -> (a fresh saver, or a context opening one, inside the running loop; its class, or
#: "postgres" for langgraph-checkpoint-postgres's on the test server; the API the suite calls)
SAVERS: dict[str, tuple[Callable[[], Any], type[BaseCheckpointSaver] | str, str]] = {
    "InMemorySaver/async": (InMemorySaver, InMemorySaver, "async"),
    "InMemorySaver/sync": (InMemorySaver, InMemorySaver, "sync"),
    "AsyncSqliteSaver/async": (lambda: AsyncSqliteSaver.from_conn_string(":memory:"), AsyncSqliteSaver, "async"),
    "SqliteSaver/sync": (_sqlite_saver, SqliteSaver, "sync"),
    "ExtendedInMemorySaver/async": (ExtendedInMemorySaver, ExtendedInMemorySaver, "async"),
    "ExtendedInMemorySaver/sync": (ExtendedInMemorySaver, ExtendedInMemorySaver, "sync"),
    "AsyncPostgresSaver/async": (lambda: _postgres_saver("async"), "postgres", "async"),
    "PostgresSaver/sync": (lambda: _postgres_saver("sync"), "postgres", "sync"),
}


def _implemented(cls: type[BaseCheckpointSaver], api: str) -> set[str]:
    """The suite's capabilities a saver class implements, on the API the suite will call."""
    def overridden(cap: Capability) -> bool:
        name = cap.value if api == "sync" else "a" + cap.value
        return getattr(cls, name) is not getattr(BaseCheckpointSaver, name)
    return {cap.value for cap in Capability if overridden(cap)}


def _conformance(name: str, memory: FlexAMem | None) -> tuple[dict[str, tuple[int, int]], set[str]]:
    """Run the suite on a fresh saver per capability: (passed, failed) per capability run."""
    opener, cls, api = SAVERS[name]
    capabilities = _implemented(_postgres_class(api) if cls == "postgres" else cls, api)

    async def factory() -> AsyncIterator[BaseCheckpointSaver]:
        opened = opener()
        if isinstance(opened, BaseCheckpointSaver):
            saver, close = opened, None
        else:
            saver, close = await opened.__aenter__(), opened
        if memory is not None:
            saver = FlexAMemSaver(saver, memory=memory)
        try:
            yield SyncAPI(saver) if api == "sync" else saver
        finally:
            if close is not None:
                await close.__aexit__(None, None, None)

    registered = checkpointer_test(name=f"{name} {'wrapped' if memory else 'plain'}")(factory)
    report = asyncio.run(validate(registered, capabilities=capabilities))
    results = {cap: (r.tests_passed, r.tests_failed) for cap, r in report.results.items() if r.detected}
    return results, capabilities


@pytest.mark.parametrize("name", list(SAVERS))
def test_conformance_suite_passes_through_the_wrapper(name: str, make_mem: Any) -> None:
    if SAVERS[name][1] == "postgres":
        pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph-checkpoint-postgres is not installed")
        postgres_url()  # skips here (fails under CI=true) when the server is not up
    plain, capabilities = _conformance(name, None)
    wrapped, _ = _conformance(name, make_mem())
    assert set(plain) == capabilities and all(failed == 0 for _, failed in plain.values()), plain
    assert wrapped == plain, "the wrapper passes exactly what the wrapped saver passes"
    passed = sum(p for p, _ in wrapped.values())
    assert passed >= (81 if name.startswith("Extended") else 58)


def test_every_saver_method_is_delegated(make_mem: Any, tmp_path: Any) -> None:
    public = {n for n in dir(BaseCheckpointSaver) if not n.startswith("_")}
    assert public - set(vars(FlexAMemSaver)) == set(), "a BaseCheckpointSaver method FlexAMemSaver does not delegate"
    inner = SqliteSaver(sqlite3.connect(tmp_path / "c.db", check_same_thread=False))
    saver = FlexAMemSaver(inner, memory=make_mem())
    assert isinstance(saver, BaseCheckpointSaver)
    assert saver.serde is inner.serde and saver.config_specs == inner.config_specs
    assert saver.get_next_version(None, None).split(".")[0] == inner.get_next_version(None, None).split(".")[0]
    assert saver.conn is inner.conn and saver.setup == inner.setup  # the rest through __getattr__
    if inner.with_allowlist({("my_app", "State")}) is inner:
        assert saver.with_allowlist({("my_app", "State")}) is saver
    strict = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=[("my_app", "Base")]))
    wrapped = FlexAMemSaver(strict, memory=saver.memory)
    allowed = wrapped.with_allowlist({("my_app", "State")})  # what a graph with a checkpointer calls
    assert isinstance(allowed, FlexAMemSaver) and allowed.memory is saver.memory
    assert isinstance(allowed.saver, InMemorySaver) and allowed.saver is not strict
    assert allowed.serde is allowed.saver.serde is not strict.serde
    with pytest.raises(NotImplementedError):
        saver.copy_thread("a", "b")  # as the wrapped saver: SqliteSaver cannot
    with pytest.raises(NotImplementedError):
        asyncio.run(saver.aget_tuple({"configurable": {"thread_id": "a"}}))
    with pytest.raises(TypeError):
        FlexAMemSaver(inner, memory=FlexAMemMiddleware(saver.memory))  # type: ignore[arg-type]


# -- a create_agent loop --------------------------------------------------------------------


class StoreAtModelCall(AgentMiddleware):
    """Records, before each model call (and so before it renders), the saved history's length
    and the unit keys the thread's namespace then holds."""

    def __init__(self, mem: FlexAMem, namespace: str) -> None:
        super().__init__()
        self.mem, self.ns, self.seen = mem, namespace, []

    def before_model(self, state: Any, runtime: Any) -> None:
        keys = frozenset(n.unit_key for n in self.mem.store.notes(self.ns)) if self.ns in self.mem.store.namespaces() \
            else frozenset()
        self.seen.append((len(state["messages"]), keys))

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        self.before_model(state, runtime)


def requests(received: Sequence[Sequence[BaseMessage]]) -> str:
    """Every request as sent, as one JSON text; each random id (LangChain's run ids, the tool
    node's uuids) replaced by its rank of first appearance, so two runs compare byte for byte."""
    ids: dict[str, str] = {}
    calls = []
    for call in received:
        dumped = []
        for m in call:
            d = m.model_dump()
            if d.get("id"):
                d["id"] = ids.setdefault(d["id"], f"id-{len(ids)}")
            dumped.append(d)
        calls.append(dumped)
    return json.dumps(calls, sort_keys=True, default=str)


def _run(lg: SimpleNamespace, make_mem: Any, wrap: bool, *, run_async: bool = False) -> SimpleNamespace:
    mem = make_mem()
    thread = "saver-orion"
    model = lg.ScriptedToolModel(responses=lg.investigation_script("orion"))
    watch = StoreAtModelCall(mem, thread)
    saver = FlexAMemSaver(InMemorySaver(), memory=mem) if wrap else InMemorySaver()
    agent = create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT, checkpointer=saver,
                         middleware=[watch, FlexAMemMiddleware(mem)])
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 100}
    task = {"messages": [HumanMessage(lg.task_text("orion"))]}
    # durability="sync": each save is done before the next step starts (the default saves in
    # the background, alongside the next step; ingestion then simply runs there).
    if run_async:
        asyncio.run(agent.ainvoke(task, config, durability="sync"))
    else:
        agent.invoke(task, config, durability="sync")
    return SimpleNamespace(mem=mem, ns=thread, model=model, seen=watch.seen, saver=saver,
                           state=agent.get_state(config).values["messages"])


def _units_of(make_mem: Any, history: Sequence[BaseMessage]) -> frozenset[str]:
    """The unit keys a fresh memory writes for a history (keys are content hashes)."""
    fresh = make_mem()
    fresh.ingest(to_core(history).messages, namespace="x")
    return frozenset(n.unit_key for n in fresh.store.notes("x")) if "x" in fresh.store.namespaces() else frozenset()


@pytest.mark.parametrize("run_async", [False, True], ids=["invoke", "ainvoke"])
def test_agent_units_are_written_at_put_time_and_requests_are_unchanged(lg: SimpleNamespace, make_mem: Any,
                                                                       run_async: bool) -> None:
    plain = _run(lg, make_mem, wrap=False, run_async=run_async)
    wrapped = _run(lg, make_mem, wrap=True, run_async=run_async)
    assert wrapped.ns == namespace_for_thread("saver-orion")

    # Before every model call the store already holds exactly the units of the saved history;
    # with a plain saver only what earlier renders wrote, which falls behind.
    expected = [_units_of(make_mem, wrapped.state[:n]) for n, _ in wrapped.seen]
    assert [keys for _, keys in wrapped.seen] == expected
    assert len(expected[-1]) >= 3
    assert any(keys != _units_of(make_mem, plain.state[:n]) for n, keys in plain.seen)
    # After the run: the final checkpoint's units too, so nothing is left to write.
    assert wrapped.mem.ingest(to_core(wrapped.state).messages, namespace=wrapped.ns) == 0

    # The render finds the units already written and sends the same requests, byte for byte.
    assert requests(wrapped.model.received) == requests(plain.model.received)
    extra = lg.extra_tokens(wrapped.mem, lg.SYSTEM_PROMPT, lg.TOOLS)
    lg.check_run(wrapped.model.received, wrapped.state, wrapped.mem, "orion", extra_tokens=extra)
    assert [m.text for m in wrapped.state] == [m.text for m in plain.state]
    assert len(list(wrapped.saver.list({"configurable": {"thread_id": wrapped.ns}}))) == \
        len(list(plain.saver.list({"configurable": {"thread_id": plain.ns}})))


def test_subgraph_and_unchanged_checkpoints_are_not_ingested(lg: SimpleNamespace, make_mem: Any) -> None:
    mem = make_mem()
    saver = FlexAMemSaver(InMemorySaver(), memory=mem)
    history = _long_history(lg)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": history}
    sub = {"configurable": {"thread_id": "t", "checkpoint_ns": "agent:1"}}
    saver.put(sub, checkpoint, {}, {"messages": 1})
    root = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver.put(root, checkpoint, {}, {"other": 2})  # the messages channel did not change
    assert "t" not in mem.store.namespaces()
    saver.put(root, checkpoint, {}, {"messages": 1})
    assert mem.store.notes("t") and mem.ingest(to_core(history).messages, namespace="t") == 0
    assert saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "agent:1"}}) is not None


# -- a failing ingestion ----------------------------------------------------------------------


def _long_history(lg: SimpleNamespace) -> list[BaseMessage]:
    """A conversation with many complete units."""
    history: list[BaseMessage] = [HumanMessage(lg.task_text("vega"), id="task")]
    for i in range(12):
        history += [AIMessage(f"Step {i}: reading part {i}.", id=f"a{i}"),
                    HumanMessage(lg.file_text(f"vega/part_{i}.py"), id=f"u{i}")]
    return history


@pytest.fixture
def closed_memory(make_mem: Any, tmp_path: Any) -> Iterator[FlexAMem]:
    """A memory whose store's database connection is closed: every read and write fails."""
    conn = sqlite3.connect(tmp_path / "store.db", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    mem = make_mem(store=LangGraphBaseStore(store))
    conn.close()
    yield mem


@pytest.mark.parametrize("run_async", [False, True], ids=["put", "aput"])
def test_failing_ingest_keeps_the_checkpoint_and_warns_once(lg: SimpleNamespace, closed_memory: FlexAMem,
                                                           run_async: bool, caplog: pytest.LogCaptureFixture) -> None:
    history = _long_history(lg)

    def reply(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [AIMessage("All parts read.", id="done")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    graph = builder.compile(checkpointer=FlexAMemSaver(InMemorySaver(), memory=closed_memory))
    config = {"configurable": {"thread_id": "broken"}}
    with caplog.at_level(logging.WARNING, logger="flexamem"):
        # durability="exit": one save, when the run ends
        if run_async:
            result = asyncio.run(graph.ainvoke({"messages": history}, config, durability="exit"))
        else:
            result = graph.invoke({"messages": history}, config, durability="exit")
    saved = graph.get_state(config).values["messages"]
    assert [m.id for m in saved] == [m.id for m in result["messages"]] == [*(m.id for m in history), "done"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("flexamem")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "broken" in warnings[0].getMessage() and "checkpoint is saved" in warnings[0].getMessage()
