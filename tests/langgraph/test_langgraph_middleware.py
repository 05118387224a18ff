"""End to end: ``create_agent`` with FlexAMemMiddleware, a fake tool-calling model and real tools."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any

import pytest
from flexamem_langgraph import FlexAMemMiddleware, LangChainRender, render_langchain, to_core
from flexamem_langgraph.namespaces import namespace_for_thread, resolve_namespace
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from flexamem_core.stores import NamespaceError, check_namespace


def _agent(lg: SimpleNamespace, model: Any, middleware: FlexAMemMiddleware, checkpointer: Any = None) -> Any:
    return create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT, middleware=[middleware],
                        checkpointer=checkpointer)


def test_sync_and_async_runs_render_memory_and_keep_threads_apart(lg: SimpleNamespace, make_mem: Any,
                                                                   make_model: Any) -> None:
    mem = make_mem()
    outcomes: list[LangChainRender] = []
    middleware = FlexAMemMiddleware(mem, on_render=outcomes.append)
    saver = InMemorySaver()
    extra = lg.extra_tokens(mem, lg.SYSTEM_PROMPT, lg.TOOLS)

    model_a = make_model("orion")
    agent_a = _agent(lg, model_a, middleware, saver)
    config_a = {"configurable": {"thread_id": "thread-orion"}, "recursion_limit": 100}
    result_a = agent_a.invoke({"messages": [HumanMessage(lg.task_text("orion"))]}, config_a)

    model_b = make_model("vega")
    agent_b = _agent(lg, model_b, middleware, saver)
    config_b = {"configurable": {"thread_id": "thread-vega"}, "recursion_limit": 100}
    result_b = asyncio.run(agent_b.ainvoke({"messages": [HumanMessage(lg.task_text("vega"))]}, config_b))

    lg.check_run(model_a.received, result_a["messages"], mem, "orion", other_tag="vega", extra_tokens=extra)
    lg.check_run(model_b.received, result_b["messages"], mem, "vega", other_tag="orion", extra_tokens=extra)
    # The checkpoints hold the complete history, not the rendered one.
    saved = agent_a.get_state(config_a).values["messages"]
    assert [m.id for m in saved] == [m.id for m in result_a["messages"]]
    assert {o.namespace for o in outcomes} == {"thread-orion", "thread-vega"}
    assert set(mem.store.namespaces()) == {"thread-orion", "thread-vega"}
    rendered = [o for o in outcomes if not o.rendered.passthrough]
    assert rendered and all(o.rendered.tokens <= mem.config.effective_budget for o in rendered)


def test_budget_counts_system_prompt_and_tool_schemas(lg: SimpleNamespace, make_mem: Any,
                                                     make_model: Any) -> None:
    """The tokens of every call are the messages the model got (system prompt included) plus
    the tool schemas; so a history that fits alone is rendered once they are added."""
    mem = make_mem()
    outcomes: list[LangChainRender] = []
    model = make_model("vega")
    agent = _agent(lg, model, FlexAMemMiddleware(mem, on_render=outcomes.append), InMemorySaver())
    agent.invoke({"messages": [HumanMessage(lg.task_text("vega"))]},
                 {"configurable": {"thread_id": "vega"}, "recursion_limit": 100})
    schemas = lg.tool_tokens(mem, lg.TOOLS)
    assert schemas > 50
    for outcome, call in zip(outcomes, model.received, strict=True):
        assert outcome.rendered.tokens == mem.count_messages(to_core(call).messages, extra_tokens=schemas)
    # A history that fits the budget alone is no longer passed through once they count (cut after
    # a tool result: a history ending in open calls is sent with placeholder results, which count too).
    history = agent.get_state({"configurable": {"thread_id": "vega"}}).values["messages"][:5]
    extra = lg.extra_tokens(mem, lg.SYSTEM_PROMPT, lg.TOOLS)
    alone = mem.count_messages(to_core(history).messages)
    budget = math.ceil((alone + extra // 2) / mem.config.tuning.safety_margin)
    assert render_langchain(mem, history, namespace="vega-a", budget=budget).rendered.passthrough
    assert not render_langchain(mem, history, namespace="vega-b", budget=budget,
                                extra_tokens=extra).rendered.passthrough


def test_no_checkpointer_uses_the_explicit_namespace(lg: SimpleNamespace, make_mem: Any,
                                                     make_model: Any) -> None:
    mem = make_mem()
    outcomes: list[LangChainRender] = []
    agent = _agent(lg, make_model("orion"), FlexAMemMiddleware(mem, namespace="user-42",
                                                               on_render=outcomes.append))
    agent.invoke({"messages": [HumanMessage(lg.task_text("orion"))]}, {"recursion_limit": 100})
    assert outcomes and {o.namespace for o in outcomes} == {"user-42"}


def test_bad_arguments_fail_clearly(make_mem: Any) -> None:
    with pytest.raises(ValueError, match="budget"):
        FlexAMemMiddleware(make_mem(), budget=0)
    with pytest.raises(NamespaceError):
        FlexAMemMiddleware(make_mem(), namespace="bad name!")


def test_thread_ids_that_are_not_namespace_names_map_to_stable_distinct_names() -> None:
    assert namespace_for_thread("3f2a-uuid") == "3f2a-uuid"
    weird = [namespace_for_thread(t) for t in ("user 42", "user#42", "", "ü" * 300)]
    assert len(set(weird)) == 4 and all(check_namespace(n) for n in weird)
    assert namespace_for_thread("user 42") == weird[0]
    assert resolve_namespace("fallback", config={"configurable": {"thread_id": "user 42"}}) == weird[0]
    assert resolve_namespace("fallback", config={"configurable": {}}) == "fallback"


def test_human_in_the_loop_interrupts_and_resumes_intact(lg: SimpleNamespace, make_mem: Any,
                                                         make_model: Any) -> None:
    mem = make_mem()
    model = make_model("orion")
    agent = create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT, checkpointer=InMemorySaver(),
                         middleware=[FlexAMemMiddleware(mem),
                                     HumanInTheLoopMiddleware(interrupt_on={"run_tests": True})])
    config = {"configurable": {"thread_id": "hitl"}, "recursion_limit": 100}
    agent.invoke({"messages": [HumanMessage(lg.task_text("orion"))]}, config)
    approvals = 0
    while agent.get_state(config).interrupts:
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
        approvals += 1
    assert approvals == 3, "each run_tests call paused for approval"
    lg.check_run(model.received, agent.get_state(config).values["messages"], mem, "orion",
                 extra_tokens=lg.extra_tokens(mem, lg.SYSTEM_PROMPT, lg.TOOLS))


def test_time_travel_replays_from_an_earlier_checkpoint(lg: SimpleNamespace, make_mem: Any,
                                                       make_model: Any) -> None:
    """Replaying from a checkpoint renders that checkpoint's history only and forks after it."""
    mem = make_mem()
    saver = InMemorySaver()
    middleware = FlexAMemMiddleware(mem)
    agent = _agent(lg, make_model("orion"), middleware, saver)
    config = {"configurable": {"thread_id": "travel"}, "recursion_limit": 100}
    agent.invoke({"messages": [HumanMessage(lg.task_text("orion"))]}, config)
    full = agent.get_state(config).values["messages"]
    notes_before = [n.unit_key for n in mem.store.notes("travel")]
    # The checkpoint before the 7th model call: 1 task + 6 replies + 8 tool results.
    target = next(s for s in agent.get_state_history(config)
                  if s.next == ("model",) and len(s.values["messages"]) == 15)
    script = lg.investigation_script("orion")
    replay_model = lg.ScriptedToolModel(responses=script[6:])
    replay = _agent(lg, replay_model, middleware, saver)
    replay.invoke(None, {**target.config, "recursion_limit": 100})
    first = replay_model.received[0]
    [memory] = lg.memory_messages(first)
    assert all("views.py" not in m.text and "orionbilling" not in m.text for m in first), \
        "nothing from after the checkpoint is rendered"
    assert "orion/config/db.yaml" in memory.text
    lg.check_structure(first)
    after = agent.get_state(config).values["messages"]
    assert [m.text for m in after] == [m.text for m in full], "the replayed branch reaches the same end"
    # The replayed replies are new messages (new ids): they fork after the shared units,
    # which are neither written again nor changed.
    notes_after = [n.unit_key for n in mem.store.notes("travel")]
    assert notes_after[:len(notes_before)] == notes_before and len(set(notes_after)) == len(notes_after)
    forked = [mem.store.get_unit("travel", k) for k in notes_after[len(notes_before):]]
    assert forked and forked[0].parent in notes_before, "the branch continues the shared chain"
