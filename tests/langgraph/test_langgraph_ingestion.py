"""Ingestion keyed by message id under real checkpointers: edits under the same id, a
``RemoveMessage(REMOVE_ALL_MESSAGES)`` rewrite, and a restart with LangGraph's own
SqliteSaver and SqliteStore (FlexA-Mem's notes kept through LangGraphBaseStore)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from flexamem_langgraph import FlexAMemMiddleware, LangChainRender, LangGraphBaseStore, to_core
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.sqlite import SqliteStore

from flexamem_core import FlexAMem, FlexAMemConfig


def continuation(tag: str, n: int) -> list[AIMessage]:
    """``n`` more file reads on new paths, then an answer."""
    replies = [AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": f"{tag}/later/f{i}.py"},
                                                  "id": f"{tag}-later-{i}", "type": "tool_call"}])
               for i in range(n)]
    return [*replies, AIMessage(content=f"Follow-up on {tag} done.")]


@pytest.fixture(params=["memory-saver", "sqlite-saver"])
def checkpointer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory-saver":
        yield InMemorySaver()
        return
    conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def _agent(lg: SimpleNamespace, model: Any, mem: FlexAMem, outcomes: list, checkpointer: Any) -> Any:
    return create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT, checkpointer=checkpointer,
                        middleware=[FlexAMemMiddleware(mem, on_render=outcomes.append)])


def _old_keys(mem: FlexAMem, ns: str, report: dict[str, Any]) -> set[str]:
    """Keys of the old units the namespace's last render covered (its matched chain's first
    ``old_units``; the report itself lists only the units it did something with)."""
    return {u.key for u in mem.state(ns).units[:report["old_units"]]}


def _chain(mem: FlexAMem, ns: str) -> set[str]:
    """Unit keys on the chain ending at the newest written unit."""
    parents = mem.store.parents(ns)
    key: str | None = mem.store.notes(ns)[-1].unit_key
    chain = set()
    while key is not None:
        chain.add(key)
        key = parents.get(key)
    return chain


def test_edit_and_rewrite_keep_ingestion_correct_and_idempotent(lg: SimpleNamespace, make_mem: Any,
                                                                checkpointer: Any) -> None:
    mem = make_mem()
    ns = "edits"
    config = {"configurable": {"thread_id": ns}, "recursion_limit": 100}
    script = [*lg.investigation_script("orion"), *continuation("orion", 2), *continuation("orionz", 6)]
    model = lg.ScriptedToolModel(responses=script)
    outcomes: list[LangChainRender] = []
    agent = _agent(lg, model, mem, outcomes, checkpointer)
    agent.invoke({"messages": [HumanMessage(lg.task_text("orion"))]}, config)

    history = agent.get_state(config).values["messages"]
    mem.ingest(to_core(history).messages, namespace=ns)
    assert mem.ingest(to_core(history).messages, namespace=ns) == 0, "ingestion is idempotent"
    before = [n.unit_key for n in mem.store.notes(ns)]
    first_unit = before[0]
    assert any(m.id == history[2].id for m in mem.store.get_unit(ns, first_unit).messages)

    # 1. Edit the oldest tool output under its id; the graph replaces it in place.
    old = history[2]
    assert isinstance(old, ToolMessage)
    edited = ToolMessage("EDITED: the database settings moved to the vault\n" + old.text,
                         tool_call_id=old.tool_call_id, id=old.id)
    agent.update_state(config, {"messages": [edited]})
    outcomes.clear()
    agent.invoke({"messages": [HumanMessage("Check two more files.")]}, config)
    state = agent.get_state(config).values["messages"]
    assert state[2].text.startswith("EDITED") and [m.id for m in state[:len(history)]] == [m.id for m in history]
    after = [n.unit_key for n in mem.store.notes(ns)]
    assert after[:len(before)] == before, "old units are kept, never rewritten"
    forked = [k for k in after if k not in before]
    assert forked, "the edit forks a new chain"
    first_forked = mem.store.get_unit(ns, forked[0])
    assert first_forked.parent is None and "EDITED" in first_forked.raw
    last = outcomes[-1]
    assert not last.rendered.passthrough
    shown = _old_keys(mem, ns, last.report)
    assert first_unit not in shown and shown <= _chain(mem, ns)
    assert forked[0] in shown, "the timeline shows the edited unit in place of the old one"
    state_core = to_core(state).messages
    mem.ingest(state_core, namespace=ns)
    assert mem.ingest(state_core, namespace=ns) == 0

    # 2. Rewrite the whole history (as a summarizer does): remove all, keep a summary and the task.
    summary = HumanMessage("Summary so far: the client uses port 5432, the config was edited.", id="summary-1")
    agent.update_state(config, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), state[0], summary]})
    rewritten = agent.get_state(config).values["messages"]
    assert [m.id for m in rewritten] == [state[0].id, "summary-1"]
    outcomes.clear()
    keys_before_rewrite = set(mem.store.parents(ns))
    agent.invoke({"messages": [HumanMessage("Read six more files.")]}, config)
    assert outcomes[0].rendered.passthrough and outcomes[0].messages[:2] == rewritten
    last = outcomes[-1]
    assert not last.rendered.passthrough, "the new chain outgrew the budget again"
    shown = _old_keys(mem, ns, last.report)
    assert shown and shown.isdisjoint(keys_before_rewrite), "only the rewritten history is rendered"
    assert "orion/config/db.yaml" not in last.rendered.memory_text
    assert keys_before_rewrite <= set(mem.store.parents(ns)), "old units are kept"
    final = to_core(agent.get_state(config).values["messages"]).messages
    mem.ingest(final, namespace=ns)
    count = len(mem.store.notes(ns))
    assert mem.ingest(final, namespace=ns) == 0 and len(mem.store.notes(ns)) == count


def test_memory_persists_with_the_graph_across_a_restart(lg: SimpleNamespace, lg_tokenizer: Any,
                                                         lg_embedder: Any, tmp_path: Path) -> None:
    """SqliteSaver keeps the thread, SqliteStore (via LangGraphBaseStore) keeps the notes."""
    config = {"configurable": {"thread_id": "restart"}, "recursion_limit": 100}

    def open_all() -> tuple[Any, FlexAMem, list[sqlite3.Connection]]:
        conns = [sqlite3.connect(tmp_path / name, check_same_thread=False, isolation_level=None)
                 for name in ("checkpoints.db", "store.db")]
        store = SqliteStore(conns[1])
        store.setup()
        mem = FlexAMem(FlexAMemConfig(budget=lg.BUDGET), store=LangGraphBaseStore(store),
                       tokenizer=lg_tokenizer, embedder=lg_embedder)
        return SqliteSaver(conns[0]), mem, conns

    saver, mem, conns = open_all()
    agent = _agent(lg, lg.ScriptedToolModel(responses=lg.investigation_script("orion")), mem, [], saver)
    agent.invoke({"messages": [HumanMessage(lg.task_text("orion"))]}, config)
    stored = [n.unit_key for n in mem.store.notes("restart")]
    assert stored
    for c in conns:
        c.close()

    saver, mem, conns = open_all()  # a new process: nothing in memory but what the stores hold
    try:
        outcomes: list[LangChainRender] = []
        model = lg.ScriptedToolModel(responses=continuation("orion", 1))
        agent = _agent(lg, model, mem, outcomes, saver)
        agent.invoke({"messages": [HumanMessage("One more file, please.")]}, config)
        state = agent.get_state(config).values["messages"]
        assert state[0].text == lg.task_text("orion") and state[-1].text == "Follow-up on orion done."
        after = [n.unit_key for n in mem.store.notes("restart")]
        assert after[:len(stored)] == stored and len(set(after)) == len(after), "no unit written twice"
        memory = outcomes[-1].rendered.memory_text
        assert memory is not None and memory.startswith("<memory>")
        assert set(stored) <= _old_keys(mem, "restart", outcomes[-1].report), \
            "the render after the restart knows every unit written before it"
        lg.check_structure(model.received[-1])
        assert mem.ingest(to_core(state).messages, namespace="restart") <= 1
        assert mem.ingest(to_core(state).messages, namespace="restart") == 0
        persisted = [n.unit_key for n in mem.store.notes("restart")]

        # A process whose notes were lost rebuilds them from the checkpointed history:
        # unit keys are content hashes, so it writes exactly the units that were lost.
        fresh = FlexAMem(FlexAMemConfig(budget=lg.BUDGET), tokenizer=lg_tokenizer, embedder=lg_embedder)
        outcomes.clear()
        agent = _agent(lg, lg.ScriptedToolModel(responses=continuation("orionx", 1)), fresh, outcomes, saver)
        agent.invoke({"messages": [HumanMessage("And one last file.")]}, config)
        assert outcomes[0].rendered.memory_text is not None
        rebuilt = [n.unit_key for n in fresh.store.notes("restart")]
        assert rebuilt[:len(persisted)] == persisted, "the same units, in the same order"
    finally:
        for c in conns:
            c.close()
