"""Render a list of LlamaIndex messages through a FlexA-Mem engine, and map the result back.

Both the memory (``FlexAMemory.get``) and the LLM wrapper (``FlexAMemLLM``) go through
here, so the ids that key ingestion are the same in both: the n-th message of the chat
log is ``m<n>`` wherever it is rendered from, which makes the tool loop's units a
continuation of the memory's chain instead of a second copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llama_index.core.base.llms.types import ChatMessage

from flexamem_core import FlexAMem, Message

from .convert import from_core_list, to_core


@dataclass(frozen=True)
class ChatRender:
    """What one render produced: the messages for the LLM and the core's ``Rendered``."""

    messages: list[ChatMessage]
    rendered: object  # flexamem_core.Rendered (kept loose: the core defines it)


def core_history(prefix: Sequence[ChatMessage], log: Sequence[ChatMessage],
                 tail: Sequence[ChatMessage] = ()) -> tuple[list[Message], list[ChatMessage]]:
    """Core messages for ``prefix + log + tail`` and the originals they map back to.

    Log and tail messages are numbered as positions of the chat log (``m0``, ``m1``, ...;
    the tail continues the log, where the agent will put it when the run finishes);
    prefix messages (an agent's system prompt) get ``p0``, ``p1``, ...
    """
    originals = [*prefix, *log, *tail]
    core = [to_core(m, i, f"p{i}") for i, m in enumerate(prefix)]
    core += [to_core(m, len(prefix) + j, f"m{j}") for j, m in enumerate([*log, *tail])]
    return core, originals


def validate_budget(budget: int, extra_tokens: int) -> None:
    """The same guard as ``ChatMemoryBuffer``: fixed tokens cannot take the whole budget."""
    if extra_tokens < 0:
        raise ValueError(f"initial_token_count must be >= 0, got {extra_tokens}")
    if extra_tokens >= budget:
        raise ValueError(f"Initial token count {extra_tokens} exceeds token limit {budget}")


def render_chat(engine: FlexAMem, namespace: str, prefix: Sequence[ChatMessage],
                log: Sequence[ChatMessage], tail: Sequence[ChatMessage] = (), *,
                query: str | None = None, extra_tokens: int = 0, budget: int | None = None) -> ChatRender:
    """Render ``prefix + log + tail`` for one call; returns copies, never the host's objects."""
    validate_budget(budget or engine.config.budget, extra_tokens)
    core, originals = core_history(prefix, log, tail)
    if not core:
        return ChatRender(messages=[], rendered=None)
    rendered = engine.render(core, namespace=namespace, budget=budget, query=query,
                             extra_tokens=extra_tokens)
    return ChatRender(messages=from_core_list(rendered.messages, originals), rendered=rendered)


async def arender_chat(engine: FlexAMem, namespace: str, prefix: Sequence[ChatMessage],
                       log: Sequence[ChatMessage], tail: Sequence[ChatMessage] = (), *,
                       query: str | None = None, extra_tokens: int = 0,
                       budget: int | None = None) -> ChatRender:
    """Async twin of :func:`render_chat` (the core renders in a worker thread)."""
    validate_budget(budget or engine.config.budget, extra_tokens)
    core, originals = core_history(prefix, log, tail)
    if not core:
        return ChatRender(messages=[], rendered=None)
    rendered = await engine.arender(core, namespace=namespace, budget=budget, query=query,
                                    extra_tokens=extra_tokens)
    return ChatRender(messages=from_core_list(rendered.messages, originals), rendered=rendered)
