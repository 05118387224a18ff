"""The FlexA-Mem settings each LlamaIndex use gets by default.

- ``"chat"`` (chat engines, and agents whose memory mostly holds conversation): reader
  units, i.e. the conversation cut at user turns into spans of about 2,000 tokens, whose
  rule-written records keep who said what with names, dates and numbers. Recovery is
  ``auto`` (the core's default): the user's message (``get(input=...)``) is the question
  that ranks old turns, the best of them are shown verbatim, and each call still gets a
  recent window of turns verbatim.
- ``"agent"`` (tool loops, ``FlexAMemLLM``): agent units, i.e. an assistant message with
  all its tool calls and results is one step, steps packed to 1,000 tokens, unit
  recovery (``auto``) with the task and the newest step as the query.

Unit sizes are the paper's (2,000 / 1,000 tokens) capped at a quarter of the budget,
the paper's ratio at its smallest budget, so a unit always fits the recent window and
small budgets still get several units to choose from. Explicit settings win.
"""

from __future__ import annotations

from typing import Any, Literal

from flexamem_core import FlexAMemConfig
from flexamem_core.host import BudgetError, check_budget

Kind = Literal["chat", "agent"]

#: Budget when neither a budget nor an LLM is given (ChatMemoryBuffer's default token limit).
DEFAULT_BUDGET = 3000
#: Share of an LLM's context window used as the budget (ChatMemoryBuffer uses the same ratio).
CONTEXT_WINDOW_SHARE = 0.75

_KIND_SETTINGS: dict[str, dict[str, Any]] = {
    "chat": {"history": "reader", "mode": "auto"},
    "agent": {"history": "agent", "mode": "auto"},
}


def config_for(kind: Kind, budget: int, **overrides: Any) -> FlexAMemConfig:
    """The config of a preset with a budget; ``overrides`` are any other FlexAMemConfig settings."""
    if kind not in _KIND_SETTINGS:
        raise ValueError(f"unknown memory kind {kind!r}; expected 'chat' or 'agent'")
    if check_budget(budget) is None:
        raise BudgetError("budget must be a positive integer, got None")
    defaults = FlexAMemConfig()
    units = {"reader_unit_tokens": min(defaults.tuning.reader_unit_tokens, max(1, budget // 4)),
             "agent_unit_tokens": min(defaults.tuning.agent_unit_tokens, max(1, budget // 4))}
    return FlexAMemConfig(**{**_KIND_SETTINGS[kind], "budget": budget, **overrides}).tuned(**units)
