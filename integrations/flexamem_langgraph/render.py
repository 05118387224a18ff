"""Render a LangChain history through FlexA-Mem: the step every LangGraph form shares.

The middleware, the ``pre_model_hook`` and the StateGraph helpers differ only in where
they find the history, the system prompt, the tools and the thread; all of them call
:func:`render_langchain` (or its async twin) and hand the result to the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from .convert import to_core, to_langchain

if TYPE_CHECKING:
    from flexamem_core import FlexAMem, Rendered


@dataclass(frozen=True)
class LangChainRender:
    """What one render produced: the messages to send and the core's render."""

    messages: list[BaseMessage]
    rendered: Rendered
    namespace: str

    @property
    def report(self) -> dict[str, Any]:
        """The core's JSON-serialisable render report (what was shown, at which resolution, why)."""
        return self.rendered.report


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


#: Called after every render, e.g. to log ``outcome.report`` or collect token counts.
RenderCallback = Callable[[LangChainRender], None]


def render_langchain(mem: FlexAMem, messages: Sequence[BaseMessage], *, namespace: str,
                     budget: int | None = None, extra_tokens: int = 0,
                     query: str | None = None) -> LangChainRender:
    """Render ``messages`` for one model call; the input list and its messages are not touched."""
    converted = to_core(messages)
    rendered = mem.render(converted.messages, namespace=namespace, budget=budget, query=query,
                          extra_tokens=extra_tokens)
    return LangChainRender(to_langchain(rendered.messages, converted), rendered, namespace)


async def arender_langchain(mem: FlexAMem, messages: Sequence[BaseMessage], *, namespace: str,
                            budget: int | None = None, extra_tokens: int = 0,
                            query: str | None = None) -> LangChainRender:
    """Async twin of :func:`render_langchain` (the core renders in a worker thread)."""
    converted = to_core(messages)
    rendered = await mem.arender(converted.messages, namespace=namespace, budget=budget, query=query,
                                 extra_tokens=extra_tokens)
    return LangChainRender(to_langchain(rendered.messages, converted), rendered, namespace)
