"""Notice a ``FunctionAgent`` whose tool loop went over the budget because its LLM is not wrapped.

``FunctionAgent`` reads memory once per run and then sends ``get()``'s output plus its
growing scratchpad on every LLM call; the scratchpad reaches memory only at the end, as
one ``put_messages``. When that happens, the largest request of the run was the last
``get`` output plus the scratchpad (less its final answer). If that exceeded the budget
and no :class:`~flexamem_llamaindex.FlexAMemLLM` rendered for this memory, a WARNING says
so, once per process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from llama_index.core.base.llms.types import ChatMessage, MessageRole

from flexamem_core.logs import warn_once

from .convert import core_history, tool_calls_of

if TYPE_CHECKING:
    from .memory import FlexAMemory

logger = logging.getLogger("flexamem.llamaindex")

_wrapped: set[tuple[str, str, str]] = set()
_lock = threading.Lock()


def mark_wrapped(memory: FlexAMemory) -> None:
    """A ``FlexAMemLLM`` renders this memory's loop: its requests are bounded."""
    with _lock:
        _wrapped.add(memory.handle_key)


def check_loop(memory: FlexAMemory, added: Sequence[ChatMessage]) -> int | None:
    """Tokens of the largest request the run just ended sent, if over the budget unwrapped."""
    with _lock:
        if memory.handle_key in _wrapped:
            return None
    last = memory.last_get()
    sent = list(added)
    if sent and sent[-1].role == MessageRole.ASSISTANT and not tool_calls_of(sent[-1]):
        sent = sent[:-1]  # the final answer was the reply, not part of any request
    if last is None or not sent:
        return None
    core = core_history((), [*last.output, *sent]).messages
    engine = memory.engine
    tokens = engine.count_messages(core)
    if tokens <= engine.config.effective_budget:
        return None
    warn_once("llamaindex-unwrapped-loop",
              "FlexA-Mem: an agent run sent at least %d tokens (budget %d): FlexAMemory bounds what get() "
              "returns, not the tool loop the agent adds to it. Wrap the LLM: memory, llm = "
              "flexamem_llamaindex.agent_memory(llm, ...), then FunctionAgent(llm=llm) and run(memory=memory)",
              tokens, engine.config.budget, log=logger)
    return tokens
