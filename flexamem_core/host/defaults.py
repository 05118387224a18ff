"""The one budget rule of every adapter, so one model gets the same memory in every framework.

Each adapter finds a model's input window its own way (a LangChain profile, litellm's table
of models, a LlamaIndex LLM's metadata) and takes the user's own settings its own way; what
budget and unit sizes follow from that window is decided here only:

- the budget is :data:`INPUT_SHARE` of the input window (or a fraction the user names);
- with no window known it is :data:`FALLBACK_BUDGET`, and one WARNING per adapter says so
  and how to set one;
- the config an adapter builds caps unit sizes at ``1 / UNITS_PER_BUDGET`` of the budget,
  so a unit always fits the recent window and a small budget still has several units to
  choose from. Unit sizes the user set explicitly are kept.
"""

from __future__ import annotations

import logging
import numbers
from typing import Any

from ..config import FlexAMemConfig
from ..logs import logger as core_logger
from ..logs import warn_once
from ..request.budget import BudgetError, check_budget

#: Share of the model's input window used as the budget: the ratio LlamaIndex's
#: ChatMemoryBuffer takes of an LLM's context window.
INPUT_SHARE = 0.75

#: The budget when the model's input window is not known: the core config's default.
FALLBACK_BUDGET: int = FlexAMemConfig.model_fields["budget"].default

#: A budget holds at least this many units of the size an adapter's config packs to, per
#: kind of unit. Agent units are smaller: a cache-stable request keeps its newest unit in the
#: window when it extends its memory, so that unit is sent again whole, and a smaller unit also
#: leaves a step's record to the memory sooner.
UNITS_PER_BUDGET = {"agent_unit_tokens": 8, "reader_unit_tokens": 4}


def _tokens(value: object, name: str) -> int:
    """A positive number of tokens (``None`` included in what is refused)."""
    tokens = check_budget(value, name)
    if tokens is None:
        raise BudgetError(f"{name} must be a positive integer, got None")
    return tokens


def check_fraction(fraction: object, name: str = "budget fraction") -> float:
    """``fraction`` as a float in (0, 1], or :class:`BudgetError` (a ``ValueError``)."""
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction <= 1:
        raise BudgetError(f"{name} must be in (0, 1], got {fraction!r}")
    return float(fraction)


def window_budget(input_tokens: int, fraction: float | None = None) -> int:
    """The budget for a model that takes ``input_tokens``: ``fraction`` of them (by default
    :data:`INPUT_SHARE`), at least one token."""
    share = INPUT_SHARE if fraction is None else check_fraction(fraction)
    return max(1, int(_tokens(input_tokens, "input_tokens") * share))


def default_budget(input_tokens: int | None, *, adapter: str, model: str, hint: str,
                   log: logging.Logger | None = None) -> int:
    """The budget when the user gave none: from the input window where it is known, else
    :data:`FALLBACK_BUDGET` and one WARNING per ``adapter`` naming ``model`` and the ``hint``
    of how to set a budget in that framework."""
    if input_tokens is not None:
        return window_budget(input_tokens)
    warn_once(f"{adapter}-default-budget",
              "FlexA-Mem: no budget given and the input window of %s is not known; using the default "
              "budget of %d tokens (%s)", model, FALLBACK_BUDGET, hint, log=log or core_logger)
    return FALLBACK_BUDGET


def config_for_budget(budget: int, config: FlexAMemConfig | None = None, **settings: Any) -> FlexAMemConfig:
    """``config`` (by default the library's) with ``budget`` and ``settings``, its unit sizes
    capped at ``budget // UNITS_PER_BUDGET[field]`` and never above its own; a unit size set
    explicitly (in ``config`` or ``settings``) is kept as it is."""
    budget = _tokens(budget, "budget")
    chosen = (config or FlexAMemConfig()).updated(budget=budget, **settings)
    capped = {name: min(getattr(chosen.tuning, name), max(1, budget // per_budget))
              for name, per_budget in UNITS_PER_BUDGET.items() if name not in chosen.tuning.model_fields_set}
    return chosen.tuned(**capped) if capped else chosen
