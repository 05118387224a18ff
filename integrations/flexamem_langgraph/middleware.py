"""FlexA-Mem as a ``create_agent`` middleware: the one-line way to add it to a LangChain agent.

The middleware renders in ``wrap_model_call`` and ``awrap_model_call`` and hands the
rendered messages to the model through ``request.override(messages=...)``. The graph state
is never written: ``state["messages"]``, checkpoints, time travel and human-in-the-loop see
the complete history, and only the model call sees the rendered one.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AnyMessage

from flexamem_core.stores import check_namespace

from .cache_marks import marked
from .convert import system_tokens
from .defaults import BudgetSpec, check_budget, resolve_budget, sized_memory
from .namespaces import resolve_namespace
from .render import LangChainRender, RenderCallback, arender_langchain, mem_for, render_langchain

if TYPE_CHECKING:
    from flexamem_core import FlexAMem


class FlexAMemMiddleware(AgentMiddleware):
    """Render FlexA-Mem memory for every model call of a ``create_agent`` agent.

    Usage: ``create_agent(model, tools, middleware=[FlexAMemMiddleware(budget=8000)],
    checkpointer=...)``.

    The static system prompt stays ``request.system_message``; the memory is one
    ``<memory>`` HumanMessage after it (following the task). The budget counts the system
    prompt and the tool schemas of the request. ``budget`` is tokens, or
    ``("fraction", x)`` of the request model's ``profile["max_input_tokens"]``; without
    one it is the share of that window every adapter takes (see
    :mod:`flexamem_langgraph.defaults`), and a memory the middleware makes itself (no
    ``mem``) gets the unit sizes of that budget.
    ``token_counter`` is a LangChain counter (messages -> int, or a chat model) to count
    with instead of o200k. Memory is namespaced by the run's thread id; a run without a
    thread id (no checkpointer) uses ``namespace``. Listed after LangChain's
    ``AnthropicPromptCachingMiddleware``, it also marks where the request's fixed prompt and
    memory end (:mod:`flexamem_langgraph.cache_marks`).
    """

    def __init__(self, mem: FlexAMem | None = None, *, budget: BudgetSpec = None,
                 namespace: str = "default", count_tools: bool = True,
                 token_counter: Any = None, on_render: RenderCallback | None = None) -> None:
        super().__init__()
        self.mem = mem_for(mem, token_counter)
        self._owns_mem = mem is None
        self._mem_lock = threading.Lock()
        self.budget = check_budget(budget)
        self.namespace = check_namespace(namespace)
        self.count_tools = count_tools
        self.on_render = on_render

    def _call(self, request: ModelRequest) -> tuple[FlexAMem, dict[str, Any]]:
        """The memory that renders this request, and what for: thread, budget, what it sends apart."""
        budget = resolve_budget(self.budget, request.model, self.mem, owned=self._owns_mem)
        if self._owns_mem and budget is not None:
            with self._mem_lock:
                self.mem = sized_memory(self.mem, budget)
        mem = self.mem
        return mem, {"namespace": resolve_namespace(self.namespace, request.runtime), "budget": budget,
                     "tools": request.tools if self.count_tools else (),
                     "extra_tokens": system_tokens(mem, request.system_message)}

    def _apply(self, request: ModelRequest, outcome: LangChainRender) -> ModelRequest:
        if self.on_render is not None:
            self.on_render(outcome)
        sent = outcome.messages
        if len(sent) == len(request.messages) and all(map(operator.is_, sent, request.messages)):
            return request  # passed through as given
        control = request.model_settings.get("cache_control")
        if control and outcome.rendered is not None and len(sent) == len(outcome.rendered.messages):
            sent = marked(sent, outcome.rendered.cache_breakpoints(), control)  # see .cache_marks
        return request.override(messages=cast("list[AnyMessage]", sent))

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        if not request.messages:
            return handler(request)
        mem, call = self._call(request)
        return handler(self._apply(request, render_langchain(mem, request.messages, **call)))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        if not request.messages:
            return await handler(request)
        mem, call = self._call(request)
        outcome = await arender_langchain(mem, request.messages, **call)
        return await handler(self._apply(request, outcome))
