"""End to end: the pre_model_hook of ``create_react_agent`` and hand-built StateGraphs
(a render call inside the model node, a separate render node, and a DeltaChannel history)."""

from __future__ import annotations

import asyncio
import warnings
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
from flexamem_langgraph import FlexAMemRenderer, LangChainRender
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import _messages_delta_reducer, add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict


def _react_agent(lg: SimpleNamespace, model: Any, renderer: FlexAMemRenderer) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in LangGraph v1
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, lg.TOOLS, prompt=lg.SYSTEM_PROMPT,
                                  pre_model_hook=renderer.as_pre_model_hook(), checkpointer=InMemorySaver())


def test_pre_model_hook_sync_and_async(lg: SimpleNamespace, make_mem: Any, make_model: Any) -> None:
    mem = make_mem()
    outcomes: list[LangChainRender] = []
    renderer = FlexAMemRenderer(mem, system_prompt=lg.SYSTEM_PROMPT, tools=lg.TOOLS,
                                on_render=outcomes.append)
    extra = lg.extra_tokens(mem, lg.SYSTEM_PROMPT, lg.TOOLS)
    model_a, model_b = make_model("orion"), make_model("vega")
    agent_a, agent_b = _react_agent(lg, model_a, renderer), _react_agent(lg, model_b, renderer)
    config_a = {"configurable": {"thread_id": "react-orion"}, "recursion_limit": 100}
    config_b = {"configurable": {"thread_id": "react-vega"}, "recursion_limit": 100}
    result_a = agent_a.invoke({"messages": [HumanMessage(lg.task_text("orion"))]}, config_a)
    result_b = asyncio.run(agent_b.ainvoke({"messages": [HumanMessage(lg.task_text("vega"))]}, config_b))
    lg.check_run(model_a.received, result_a["messages"], mem, "orion", other_tag="vega", extra_tokens=extra)
    lg.check_run(model_b.received, result_b["messages"], mem, "vega", other_tag="orion", extra_tokens=extra)
    # llm_input_messages is written on every call: never empty, never an earlier turn's.
    assert len(outcomes) == 2 * len(model_a.received)
    final = agent_a.get_state(config_a).values
    assert final["llm_input_messages"][-1].id == final["messages"][-2].id
    assert {o.namespace for o in outcomes} == {"react-orion", "react-vega"}


class PlainState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class NodeState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    llm_input_messages: list[AnyMessage]


class DeltaState(TypedDict):
    messages: Annotated[list[AnyMessage], DeltaChannel(_messages_delta_reducer)]


def function_graph(model: Any, renderer: FlexAMemRenderer, state: type = PlainState) -> Any:
    """The recommended StateGraph form: render inside the model node, like ``trim_messages``."""
    def call_model(s: dict[str, Any], config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(renderer.render(s["messages"], config))]}

    async def acall_model(s: dict[str, Any], config: RunnableConfig) -> dict[str, list[BaseMessage]]:
        return {"messages": [await model.ainvoke(await renderer.arender(s["messages"], config))]}

    graph = StateGraph(state)
    graph.add_node("model", RunnableLambda(call_model, afunc=acall_model))
    graph.add_node("tools", ToolNode(renderer.tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


def node_graph(model: Any, renderer: FlexAMemRenderer) -> Any:
    """The node form: a render node before the model node writes ``llm_input_messages``."""
    def call_model(s: dict[str, Any]) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(s["llm_input_messages"])]}

    graph = StateGraph(NodeState)
    graph.add_node("memory", renderer.as_node())
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(renderer.tools))
    graph.add_edge(START, "memory")
    graph.add_edge("memory", "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "memory")
    return graph.compile(checkpointer=InMemorySaver())


def _run(graph: Any, lg: SimpleNamespace, tag: str, thread: str, use_async: bool) -> list[BaseMessage]:
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 100}
    inputs = {"messages": [HumanMessage(lg.task_text(tag), id=f"{tag}-task")]}
    result = asyncio.run(graph.ainvoke(inputs, config)) if use_async else graph.invoke(inputs, config)
    return result["messages"]


def test_state_graph_render_in_model_node(lg: SimpleNamespace, make_mem: Any, make_model: Any) -> None:
    # The paper's rule (a fresh render every call): at this budget three units fill the
    # context, so the cache-stable request has no room to recover detail outside its window.
    mem = make_mem(cache_stable=False)
    renderer = FlexAMemRenderer(mem, tools=lg.TOOLS)
    extra = lg.tool_tokens(mem, lg.TOOLS)
    for tag, other, use_async in (("orion", "vega", False), ("vega", "orion", True)):
        model = make_model(tag)
        state = _run(function_graph(model, renderer), lg, tag, f"fn-{tag}", use_async)
        lg.check_run(model.received, state, mem, tag, other_tag=other, system_prompt=None, extra_tokens=extra)


def test_state_graph_render_node(lg: SimpleNamespace, make_mem: Any, make_model: Any) -> None:
    mem = make_mem(cache_stable=False)  # the paper's rule, as in the test above
    renderer = FlexAMemRenderer(mem, tools=lg.TOOLS)
    extra = lg.tool_tokens(mem, lg.TOOLS)
    for tag, other, use_async in (("orion", "vega", True), ("vega", "orion", False)):
        model = make_model(tag)
        state = _run(node_graph(model, renderer), lg, tag, f"node-{tag}", use_async)
        lg.check_run(model.received, state, mem, tag, other_tag=other, system_prompt=None, extra_tokens=extra)


def test_state_graph_with_delta_channel_history(lg: SimpleNamespace, make_mem: Any, make_model: Any) -> None:
    mem = make_mem()
    renderer = FlexAMemRenderer(mem, tools=lg.TOOLS)
    model = make_model("orion")
    graph = function_graph(model, renderer, state=DeltaState)
    state = _run(graph, lg, "orion", "delta-orion", False)
    lg.check_run(model.received, state, mem, "orion", system_prompt=None,
                 extra_tokens=lg.tool_tokens(mem, lg.TOOLS))
    restored = graph.get_state({"configurable": {"thread_id": "delta-orion"}}).values["messages"]
    assert [m.id for m in restored] == [m.id for m in state]


def test_render_of_empty_history_and_missing_key(make_mem: Any) -> None:
    renderer = FlexAMemRenderer(make_mem())
    assert renderer.render([]) == []
    with pytest.raises(ValueError, match="no 'messages' key"):
        renderer.as_node().invoke({"other": []})
