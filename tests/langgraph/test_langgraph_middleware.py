"""End to end: ``create_agent`` with FlexAMemMiddleware, a fake tool-calling model and real tools."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace
from typing import Any

import pytest
from flexamem_langgraph import FlexAMemMiddleware, LangChainRender, render_langchain, to_core
from flexamem_langgraph.budget import extra_tokens, tool_tokens
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver


def _agent(lg: SimpleNamespace, model: Any, middleware: FlexAMemMiddleware, checkpointer: Any = None) -> Any:
    return create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT, middleware=[middleware],
                        checkpointer=checkpointer)


def test_sync_and_async_runs_render_memory_and_keep_threads_apart(lg: SimpleNamespace, make_mem: Any,
                                                                   make_model: Any) -> None:
    mem = make_mem()
    outcomes: list[LangChainRender] = []
    middleware = FlexAMemMiddleware(mem, on_render=outcomes.append)
    saver = InMemorySaver()
    extra = extra_tokens(mem, lg.SYSTEM_PROMPT, lg.TOOLS)

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
    model = make_model("lyra")
    agent = _agent(lg, model, FlexAMemMiddleware(mem, on_render=outcomes.append), InMemorySaver())
    agent.invoke({"messages": [HumanMessage(lg.task_text("lyra"))]},
                 {"configurable": {"thread_id": "lyra"}, "recursion_limit": 100})
    schemas = tool_tokens(mem, lg.TOOLS)
    assert schemas > 50
    for outcome, call in zip(outcomes, model.received, strict=True):
        assert outcome.rendered.tokens == mem.count_messages(to_core(call).messages, extra_tokens=schemas)
    # A history that fits the budget alone is no longer passed through once they count.
    history = agent.get_state({"configurable": {"thread_id": "lyra"}}).values["messages"][:6]
    extra = extra_tokens(mem, lg.SYSTEM_PROMPT, lg.TOOLS)
    alone = mem.count_messages(to_core(history).messages)
    budget = math.ceil((alone + extra // 2) / mem.config.safety_margin)
    assert render_langchain(mem, history, namespace="lyra-a", budget=budget).rendered.passthrough
    assert not render_langchain(mem, history, namespace="lyra-b", budget=budget,
                                extra_tokens=extra).rendered.passthrough


def test_no_checkpointer_uses_the_explicit_namespace(lg: SimpleNamespace, make_mem: Any,
                                                     make_model: Any) -> None:
    mem = make_mem()
    outcomes: list[LangChainRender] = []
    agent = _agent(lg, make_model("draco"), FlexAMemMiddleware(mem, namespace="user-42",
                                                               on_render=outcomes.append))
    agent.invoke({"messages": [HumanMessage(lg.task_text("draco"))]}, {"recursion_limit": 100})
    assert outcomes and {o.namespace for o in outcomes} == {"user-42"}


def test_bad_arguments_fail_clearly(make_mem: Any) -> None:
    with pytest.raises(ValueError, match="budget"):
        FlexAMemMiddleware(make_mem(), budget=0)
    with pytest.raises(ValueError, match="namespace"):
        from flexamem_langgraph.namespaces import resolve_namespace

        resolve_namespace("bad name!")
