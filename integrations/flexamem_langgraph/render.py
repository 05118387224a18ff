"""Render a LangChain history through FlexA-Mem: the step every LangGraph form shares.

The middleware, the ``pre_model_hook`` and the StateGraph helpers differ only in where
they find the history, the system prompt, the tools and the thread; all of them call the
core's :func:`~flexamem_core.host.render_host` (or its async twin) with this adapter's
codec, through :func:`render_langchain`, and hand the result to the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from flexamem_core.host import HostRender, arender_host, render_host

from .convert import CODEC

if TYPE_CHECKING:
    from flexamem_core import FlexAMem

#: What one render produced: ``messages`` to send, the core's ``rendered``, ``namespace``, ``report``.
LangChainRender = HostRender[BaseMessage]

#: Called after every render, e.g. to log ``outcome.report`` or collect token counts.
RenderCallback = Callable[[LangChainRender], None]


def default_mem() -> FlexAMem:
    """A FlexAMem with the library defaults (imported lazily: the core loads models on demand)."""
    from flexamem_core import FlexAMem

    return FlexAMem()


def mem_for(mem: FlexAMem | None, token_counter: Any = None) -> FlexAMem:
    """The given memory, else a default one counting with ``token_counter`` when given."""
    if token_counter is None:
        return mem if mem is not None else default_mem()
    if mem is not None:
        raise ValueError("pass token_counter, or a FlexAMem with its own tokenizer, not both")
    from flexamem_core import FlexAMem

    from .counting import TokenCounterTokenizer

    return FlexAMem(tokenizer=TokenCounterTokenizer(token_counter))


def render_langchain(mem: FlexAMem, messages: Sequence[BaseMessage], *, namespace: str,
                     budget: int | None = None, extra_tokens: int = 0, query: str | None = None,
                     tools: Iterable[Any] | None = None) -> LangChainRender:
    """Render ``messages`` for one model call; the input list and its messages are not touched.

    ``tools`` (LangChain tools or schema dicts) and ``extra_tokens`` (a system prompt sent
    apart) count in the budget."""
    return render_host(mem, CODEC, messages, namespace=namespace, budget=budget, query=query, tools=tools,
                       extra_tokens=extra_tokens)


async def arender_langchain(mem: FlexAMem, messages: Sequence[BaseMessage], *, namespace: str,
                            budget: int | None = None, extra_tokens: int = 0, query: str | None = None,
                            tools: Iterable[Any] | None = None) -> LangChainRender:
    """Async twin of :func:`render_langchain` (the core renders in a worker thread)."""
    return await arender_host(mem, CODEC, messages, namespace=namespace, budget=budget, query=query,
                              tools=tools, extra_tokens=extra_tokens)
