"""The FlexA-Mem settings each LlamaIndex use gets by default.

- ``"chat"`` (chat engines, and agents whose memory mostly holds conversation): reader
  units, i.e. the conversation cut at user turns into spans of about 2,000 tokens, whose
  rule-written records keep who said what with names, dates and numbers. Recovery is
  ``auto`` (the core's default): the user's message (``get(input=...)``) is the question
  that ranks old turns, the best of them are shown verbatim, and each call still gets a
  recent window of turns verbatim. The first user message is kept whole ahead of the memory
  in every request (``keep_task``), as an agent's task is: a chat engine or an agent handed
  this memory opens with what it was asked to do.
- ``"agent"`` (tool loops, ``FlexAMemLLM``): agent units, i.e. an assistant message with
  all its tool calls and results is one step, steps packed to 1,000 tokens, unit
  recovery (``auto``) with the task and the newest step as the query.

The budget, when none is given, and the unit sizes of a budget follow the rule every
adapter shares (:mod:`flexamem_core.host.defaults`), so a model gets the same memory here
as in the other frameworks; this module finds the LLM's window and picks the preset.
Explicit settings win.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from flexamem_core import FlexAMemConfig
from flexamem_core.host import config_for_budget
from flexamem_core.host import default_budget as shared_default_budget

if TYPE_CHECKING:
    from llama_index.core.llms.llm import LLM

Kind = Literal["chat", "agent"]

logger = logging.getLogger("flexamem.llamaindex")

_KIND_SETTINGS: dict[str, dict[str, Any]] = {
    "chat": {"history": "reader", "mode": "auto", "keep_task": True},
    "agent": {"history": "agent", "mode": "auto"},
}


def config_for(kind: Kind, budget: int, **overrides: Any) -> FlexAMemConfig:
    """The config of a preset with a budget; ``overrides`` are any other FlexAMemConfig settings."""
    if kind not in _KIND_SETTINGS:
        raise ValueError(f"unknown memory kind {kind!r}; expected 'chat' or 'agent'")
    return config_for_budget(budget, **{**_KIND_SETTINGS[kind], **overrides})


def default_budget(llm: LLM | None) -> int:
    """The shared rule's budget of ``llm.metadata.context_window``; without an LLM, the shared
    fallback and a WARNING once."""
    return shared_default_budget(llm.metadata.context_window if llm is not None else None,
                                 adapter="llamaindex",
                                 model=type(llm).__name__ if llm is not None else "the LLM (none given)",
                                 hint="pass budget=<tokens>, or llm=<your LLM> to size it from its context window",
                                 log=logger)
