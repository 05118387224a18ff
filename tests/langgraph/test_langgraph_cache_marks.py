"""Behind LangChain's Anthropic prompt caching, the middleware also marks where the request's
fixed prompt and memory end (``flexamem_langgraph.cache_marks``)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from flexamem_langgraph import FlexAMemMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

CONTROL = {"type": "ephemeral", "ttl": "5m"}


class AnthropicCachingSetting(AgentMiddleware):
    """The setting ``langchain_anthropic``'s ``AnthropicPromptCachingMiddleware`` gives every model
    call of a ``ChatAnthropic`` (which then marks the request's last message); the scripted model
    here is not one, so the setting is given as that middleware gives it."""

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        return handler(request.override(model_settings={**request.model_settings, "cache_control": CONTROL}))


def marks(messages: list[BaseMessage]) -> list[int]:
    return [i for i, m in enumerate(messages) if isinstance(m.content, list)
            and any(isinstance(b, dict) and "cache_control" in b for b in m.content)]


def run(lg: SimpleNamespace, make_mem: Any, make_model: Any, caching: bool) -> tuple[list, list[BaseMessage]]:
    model = make_model("orion")
    middleware = [AnthropicCachingSetting()] if caching else []
    agent = create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT, checkpointer=InMemorySaver(),
                         middleware=[*middleware, FlexAMemMiddleware(make_mem())])
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    state = agent.invoke({"messages": [HumanMessage(lg.task_text("orion"))]}, config)["messages"]
    return model.received, state


def test_the_fixed_prompt_and_the_memory_are_marked_behind_anthropic_caching(lg, make_mem, make_model) -> None:
    received, state = run(lg, make_mem, make_model, caching=True)
    with_memory = [call for call in received if lg.memory_messages(call)]
    assert with_memory, "the run must outgrow the budget"
    for call in received:
        memory = [i for i, m in enumerate(call) if m in lg.memory_messages(call)]
        if not memory:
            assert marks(call) == []  # a history sent as it is: the model's own mark is all it needs
            continue
        (at,) = memory
        # the message before the memory (the task, after the system prompt) and the memory
        assert marks(call) == [i for i in (at - 1, at) if i > 0]
        for i in marks(call):
            *_, last = call[i].content
            assert last["cache_control"] == CONTROL
        assert call[at].text.startswith("<memory>")  # the text is the same, in one block
        lg.check_structure(call)
    assert marks(state) == [], "the graph state keeps the host's messages unmarked"


def test_without_the_caching_setting_nothing_is_marked(lg, make_mem, make_model) -> None:
    received, _ = run(lg, make_mem, make_model, caching=False)
    assert any(lg.memory_messages(call) for call in received)
    assert all(marks(call) == [] for call in received)
