"""The budget of a call when the user did not give one: from the model's profile.

LangChain chat models carry a ``profile`` with ``max_input_tokens`` (langchain-core's
model profiles); ``SummarizationMiddleware`` sizes its ``("fraction", x)`` limits from it,
and so does FlexA-Mem: ``budget=("fraction", 0.5)``, or by default
:data:`DEFAULT_FRACTION` of the input window. An explicit integer budget, or a ``FlexAMem``
whose config sets one, always wins; with neither a budget nor a profile the core's budget
is used and a WARNING says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from flexamem_core.host import check_budget as check_tokens
from flexamem_core.logs import warn_once

if TYPE_CHECKING:
    from flexamem_core import FlexAMem

logger = logging.getLogger("flexamem.langgraph")

#: Share of the model's input window used as the budget when none is given (the same share
#: LlamaIndex's ChatMemoryBuffer takes of an LLM's context window).
DEFAULT_FRACTION = 0.75

#: ``8000`` tokens, or ``("fraction", 0.5)`` of the model's ``profile["max_input_tokens"]``.
BudgetSpec = int | tuple[Literal["fraction"], float] | None


def check_budget(budget: BudgetSpec) -> BudgetSpec:
    """Validate a budget given to an adapter object (a positive int or a fraction in (0, 1])."""
    if budget is None:
        return None
    if isinstance(budget, tuple) and len(budget) == 2 and budget[0] == "fraction":
        fraction = budget[1]
        if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 < fraction <= 1:
            raise ValueError(f"budget fraction must be in (0, 1], got {fraction!r}")
        return ("fraction", float(fraction))
    return check_tokens(budget, "budget (tokens, or ('fraction', x))")


def profile_input_tokens(model: Any) -> int | None:
    """``model.profile["max_input_tokens"]`` when the model has one (as SummarizationMiddleware reads it)."""
    try:
        profile = model.profile
    except AttributeError:
        return None
    if not isinstance(profile, Mapping):
        return None
    limit = profile.get("max_input_tokens")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


def resolve_budget(budget: BudgetSpec, model: Any, mem: FlexAMem) -> int | None:
    """The budget of one call; ``None`` means the memory's own configured budget."""
    if isinstance(budget, int):
        return budget
    limit = profile_input_tokens(model) if model is not None else None
    if budget is not None:
        if limit is None:
            raise ValueError(f"budget={budget!r} needs the model's profile['max_input_tokens'], and "
                             f"{type(model).__name__} has none: pass budget=<tokens>, or "
                             "ChatModel(..., profile={'max_input_tokens': ...})")
        return max(1, int(limit * budget[1]))
    if "budget" in mem.config.model_fields_set:
        return None
    if limit is not None:
        return max(1, int(limit * DEFAULT_FRACTION))
    warn_once("langgraph-default-budget",
              "FlexA-Mem: no budget given and %s has no profile['max_input_tokens']; using the default "
              "budget of %d tokens (pass budget=<the model's context in tokens>)",
              type(model).__name__ if model is not None else "the model", mem.config.budget, log=logger)
    return None
