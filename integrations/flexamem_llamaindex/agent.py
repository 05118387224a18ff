"""One call that bounds every LLM call of a ``FunctionAgent``: the memory and the wrapped LLM.

``FlexAMemory`` alone bounds what ``get()`` returns, but a ``FunctionAgent`` adds its
scratchpad (the tool calls and results of the current run) on top of it, unchecked.
``agent_memory`` returns both halves at once, so the safe setup is one line::

    memory, llm = agent_memory(llm, namespace="run-7")
    agent = FunctionAgent(tools=tools, llm=llm)
    await agent.run("...", memory=memory)
"""

from __future__ import annotations

from typing import Any, NamedTuple

from llama_index.core.llms.llm import LLM

from .llm import FlexAMemLLM
from .memory import FlexAMemory
from .presets import Kind


class AgentMemory(NamedTuple):
    """``memory`` for ``agent.run(memory=...)``, ``llm`` for ``FunctionAgent(llm=...)``."""

    memory: FlexAMemory
    llm: FlexAMemLLM


def agent_memory(llm: LLM, *, namespace: str = "default", budget: int | None = None,
                 kind: Kind = "agent", **settings: Any) -> AgentMemory:
    """A ``FlexAMemory`` and ``llm`` wrapped in ``FlexAMemLLM`` on it; the budget defaults to the
    shared rule's share of ``llm.metadata.context_window``. ``settings`` go to
    ``FlexAMemory.from_defaults``."""
    memory = FlexAMemory.from_defaults(llm=llm, namespace=namespace, budget=budget, kind=kind, **settings)
    return AgentMemory(memory, FlexAMemLLM(llm, memory))
