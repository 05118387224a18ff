"""One model, one memory: LangGraph, LlamaIndex and mini-swe-agent follow the same budget rule.

For the same model input window (and for a window none of them can find) the LangGraph
middleware, the LlamaIndex memory and the mini-swe-agent model class each find the window
their own way, then arrive at the same budget and unit sizes (those of
:mod:`flexamem_core.host.defaults`) and render the same memory, byte for byte, for the same
history. Each framework runs through its own objects and its own offline fakes:
``create_agent`` with langchain-core's fake chat model carrying a ``profile``, a
``FlexAMemory`` sized from a LlamaIndex LLM's metadata, and ``FlexAMemModel`` around
mini-swe-agent's deterministic model named as a model litellm knows offline.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm's table of models, offline

import litellm
import pytest
from flexamem_langgraph import FlexAMemMiddleware, LangChainRender
from flexamem_llamaindex import FlexAMemory
from flexamem_minisweagent import FlexAMemModel
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from llama_index.core.base.llms.types import ChatMessage, LLMMetadata, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.llms import MockLLM

from flexamem_core import FlexAMemConfig, logs
from flexamem_core.host import FALLBACK_BUDGET, UNITS_PER_BUDGET, config_for_budget, window_budget
from tests.minisweagent import mswea_fakes as fakes

#: litellm models whose input window its local table knows: a 16k model, and a small one
#: whose budget caps the unit sizes.
MODELS = ["gpt-3.5-turbo-16k", "ollama/llama2"]
#: A name litellm does not know: no framework finds a window.
UNKNOWN = "deterministic"
MEMORY_TAG = "<memory>"


class WindowMockLLM(MockLLM):
    """LlamaIndex's ``MockLLM`` reporting the ``context_window`` a real LLM's metadata carries."""

    context_window: int = 3900

    def __init__(self, context_window: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.context_window = context_window

    @property
    def metadata(self) -> LLMMetadata:
        return super().metadata.model_copy(update={"context_window": self.context_window})


def history() -> list[dict[str, Any]]:
    """mini-swe-agent's tool-calling history of a long task: well over every budget here."""
    return fakes.long_history(steps=30, lines=60)


def _command(message: Mapping[str, Any]) -> tuple[str, str]:
    call = message["tool_calls"][0]
    return call["id"], json.loads(call["function"]["arguments"])["command"]


def as_langchain(messages: Sequence[Mapping[str, Any]]) -> list[BaseMessage]:
    """The same history as LangChain messages."""
    out: list[BaseMessage] = []
    for m in messages:
        if m["role"] == "system":
            out.append(SystemMessage(m["content"]))
        elif m["role"] == "user":
            out.append(HumanMessage(m["content"]))
        elif m["role"] == "assistant":
            call_id, command = _command(m)
            out.append(AIMessage(m["content"], tool_calls=[
                {"name": "bash", "args": {"command": command}, "id": call_id, "type": "tool_call"}]))
        else:
            out.append(ToolMessage(m["content"], tool_call_id=m["tool_call_id"]))
    return out


def as_llamaindex(messages: Sequence[Mapping[str, Any]]) -> list[ChatMessage]:
    """The same history as LlamaIndex chat messages."""
    out: list[ChatMessage] = []
    for m in messages:
        if m["role"] == "assistant":
            call_id, command = _command(m)
            out.append(ChatMessage(role=MessageRole.ASSISTANT, blocks=[
                TextBlock(text=m["content"]),
                ToolCallBlock(tool_call_id=call_id, tool_name="bash", tool_kwargs={"command": command})]))
        elif m["role"] == "tool":
            out.append(ChatMessage(role=MessageRole.TOOL, content=m["content"],
                                   additional_kwargs={"tool_call_id": m["tool_call_id"]}))
        else:
            out.append(ChatMessage(role=MessageRole(m["role"]), content=m["content"]))
    return out


def memory_text(texts: Sequence[str]) -> str:
    [text] = [t for t in texts if t.startswith(MEMORY_TAG)]
    return text


def via_langgraph(window: int | None) -> tuple[int, Any, str]:
    """Budget (as reported), config and memory text of a ``create_agent`` call with the middleware."""
    outcomes: list[LangChainRender] = []
    middleware = FlexAMemMiddleware(on_render=outcomes.append)
    model = GenericFakeChatModel(messages=iter([AIMessage("Done.")]),
                                 profile={"max_input_tokens": window} if window else None)
    agent = create_agent(model, [], middleware=[middleware])
    agent.invoke({"messages": as_langchain(history())}, {"configurable": {"thread_id": "lg"}})
    [outcome] = outcomes
    assert not outcome.rendered.passthrough
    return outcome.report["budget"], middleware.mem.config, memory_text([m.text for m in outcome.messages])


def via_llamaindex(window: int | None) -> tuple[int, Any, str]:
    """Budget, config and memory text of a ``FlexAMemory`` of the agent kind, sized from the LLM."""
    llm = WindowMockLLM(context_window=window) if window else None
    memory = FlexAMemory.from_defaults(as_llamaindex(history()), llm=llm, kind="agent", namespace="li")
    sent = memory.get()
    assert not memory.last_render.passthrough
    assert memory.engine.config == memory.config
    return memory.last_render.report["budget"], memory.config, memory_text([m.content or "" for m in sent])


def via_minisweagent(model_name: str) -> tuple[int, Any, str]:
    """Budget, config and memory text of ``FlexAMemModel`` around the deterministic model."""
    inner = fakes.RecordingDeterministicModel(outputs=fakes.text_outputs([]), model_name=model_name)
    model = FlexAMemModel(inner=inner)
    reply = model.query(history())
    info = reply["extra"]["flexamem"]
    assert not info["passthrough"] and info["budget"] == model.budget
    [sent] = inner.received
    return info["report"]["budget"], model.memory.config, memory_text([str(m.get("content")) for m in sent])


def _units(config: Any) -> tuple[int, int]:
    return config.tuning.agent_unit_tokens, config.tuning.reader_unit_tokens


def _check_same(expected_budget: int, results: list[tuple[int, Any, str]]) -> None:
    expected = config_for_budget(expected_budget)
    for budget, config, _ in results:
        assert budget == config.budget == expected_budget
        assert _units(config) == _units(expected)
    texts = [text for _, _, text in results]
    assert texts[0] == texts[1] == texts[2], "the same history must render the same memory"


@pytest.mark.parametrize("model_name", MODELS)
def test_a_known_window_gives_one_budget_one_unit_size_one_memory(model_name: str) -> None:
    window = litellm.model_cost[model_name]["max_input_tokens"]
    results = [via_langgraph(window), via_llamaindex(window), via_minisweagent(model_name)]
    _check_same(window_budget(window), results)


def test_the_small_window_is_one_whose_budget_caps_the_units() -> None:
    small = window_budget(litellm.model_cost[MODELS[1]]["max_input_tokens"])
    caps = (small // UNITS_PER_BUDGET["agent_unit_tokens"], small // UNITS_PER_BUDGET["reader_unit_tokens"])
    assert _units(config_for_budget(small)) == caps
    assert all(cap < size for cap, size in zip(caps, _units(FlexAMemConfig())))


def test_an_unknown_window_gives_the_fallback_in_every_framework(caplog: pytest.LogCaptureFixture) -> None:
    for adapter in ("langgraph", "llamaindex", "minisweagent"):
        logs._warned.discard(f"{adapter}-default-budget")
    caplog.set_level(logging.WARNING, logger="flexamem")
    results = [via_langgraph(None), via_llamaindex(None), via_minisweagent(UNKNOWN)]
    _check_same(FALLBACK_BUDGET, results)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "no budget given" in r.getMessage()]
    assert sorted(r.name for r in warnings) == ["flexamem.langgraph", "flexamem.llamaindex", "flexamem.minisweagent"]
    assert all(f"{FALLBACK_BUDGET} tokens" in r.getMessage() for r in warnings)
