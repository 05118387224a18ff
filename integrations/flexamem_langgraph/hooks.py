"""FlexA-Mem for graphs that are not built by ``create_agent``.

:class:`FlexAMemRenderer` is one object with three uses:

- ``renderer.render(state["messages"], config)`` inside a hand-built ``StateGraph`` model
  node, the way ``trim_messages`` is used (recommended for StateGraphs: it can never be
  stale);
- ``renderer.as_node()`` as a separate node before the model node, writing the rendered
  list to ``llm_input_messages``;
- ``renderer.as_pre_model_hook()`` for the deprecated
  ``langgraph.prebuilt.create_react_agent(pre_model_hook=...)``, which sends
  ``llm_input_messages`` to the model and leaves ``messages`` untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from flexamem_core.host import extra_tokens_of
from flexamem_core.stores import check_namespace

from .convert import CODEC, system_tokens
from .defaults import BudgetSpec, check_budget, resolve_budget, sized_memory
from .namespaces import resolve_namespace
from .render import LangChainRender, RenderCallback, arender_langchain, mem_for, render_langchain

if TYPE_CHECKING:
    from flexamem_core import FlexAMem


def _state_messages(state: Any, key: str) -> list[BaseMessage]:
    messages = state.get(key) if isinstance(state, Mapping) else getattr(state, key, None)
    if messages is None:
        raise ValueError(f"the graph state has no {key!r} key to render")
    return list(messages)


class FlexAMemRenderer:
    """Renders a LangChain message history for one model call, namespaced by thread id.

    ``system_prompt`` and ``tools`` are what the model node adds on top of the messages
    (for ``create_react_agent``: its ``prompt`` and ``tools``); they count in the budget
    but are not inserted by the renderer. A system message that is part of the history
    stays first in the rendered list. ``model`` (the chat model the node calls) gives the
    default budget from its profile, as in :class:`FlexAMemMiddleware`; ``token_counter``
    counts with a LangChain counter.
    """

    def __init__(self, mem: FlexAMem | None = None, *, budget: BudgetSpec = None,
                 namespace: str = "default", system_prompt: str | BaseMessage | None = None,
                 tools: Sequence[Any] = (), messages_key: str = "messages",
                 output_key: str = "llm_input_messages", on_render: RenderCallback | None = None,
                 model: Any = None, token_counter: Any = None) -> None:
        self.mem = mem_for(mem, token_counter)
        self._owns_mem = mem is None
        self._mem_lock = threading.Lock()
        self.budget = check_budget(budget)
        self.model = model
        self.namespace = check_namespace(namespace)
        self.system_prompt = system_prompt
        self.tools = list(tools)
        self.messages_key = messages_key
        self.output_key = output_key
        self.on_render = on_render
        self._extra: int | None = None

    def _extra_tokens(self) -> int:
        if self._extra is None:
            self._extra = system_tokens(self.mem, self.system_prompt) + extra_tokens_of(self.mem, CODEC, self.tools)
        return self._extra

    def _call(self) -> tuple[FlexAMem, int | None]:
        """The memory that renders this call and its budget (a memory the renderer made is sized
        for the budget by the shared rule)."""
        budget = resolve_budget(self.budget, self.model, self.mem, owned=self._owns_mem)
        if self._owns_mem and budget is not None:
            with self._mem_lock:
                self.mem = sized_memory(self.mem, budget)
        return self.mem, budget

    def _done(self, outcome: LangChainRender) -> list[BaseMessage]:
        if self.on_render is not None:
            self.on_render(outcome)
        return outcome.messages

    def render(self, messages: Sequence[BaseMessage], config: RunnableConfig | None = None, *,
               namespace: str | None = None) -> list[BaseMessage]:
        """The messages to send instead of ``messages`` (a new list; the input is untouched).

        The namespace is the thread id of ``config`` (or of the running graph); ``namespace``
        overrides it.
        """
        if not messages:
            return []
        ns = namespace if namespace is not None else resolve_namespace(self.namespace, config=config)
        mem, budget = self._call()
        return self._done(render_langchain(mem, messages, namespace=ns, budget=budget,
                                           extra_tokens=self._extra_tokens()))

    async def arender(self, messages: Sequence[BaseMessage], config: RunnableConfig | None = None, *,
                      namespace: str | None = None) -> list[BaseMessage]:
        """Async twin of :meth:`render`."""
        if not messages:
            return []
        ns = namespace if namespace is not None else resolve_namespace(self.namespace, config=config)
        mem, budget = self._call()
        return self._done(await arender_langchain(mem, messages, namespace=ns, budget=budget,
                                                  extra_tokens=self._extra_tokens()))

    def _node(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return {self.output_key: self.render(_state_messages(state, self.messages_key), config)}

    async def _anode(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return {self.output_key: await self.arender(_state_messages(state, self.messages_key), config)}

    def as_node(self) -> RunnableLambda:
        """A graph node (sync and async) returning ``{output_key: rendered messages}``.

        Rendered afresh on every call, so it is never empty (for a non-empty history) and
        never stale; route every path into the model node through this node.
        """
        return RunnableLambda(self._node, afunc=self._anode, name="flexamem_memory")

    def as_pre_model_hook(self) -> RunnableLambda:
        """The ``pre_model_hook`` for ``create_react_agent``: returns ``llm_input_messages``."""
        if self.output_key != "llm_input_messages":
            raise ValueError("create_react_agent reads 'llm_input_messages'; keep the default output_key")
        return self.as_node()
