"""The budget of a call when the user did not give one: from the model's profile.

LangChain chat models carry a ``profile`` with ``max_input_tokens`` (langchain-core's
model profiles); ``SummarizationMiddleware`` sizes its ``("fraction", x)`` limits from it,
and so does FlexA-Mem: ``budget=("fraction", 0.5)``, or by default the rule every adapter
shares (:mod:`flexamem_core.host.defaults`), so a model gets the same budget here as in the
other frameworks. An explicit integer budget, or a ``FlexAMem`` whose config sets one,
always wins; with neither a budget nor a profile the shared fallback is used and a WARNING
says so once. A memory the adapter made itself is sized by the same rule for the call's
budget (:func:`sized_memory`); one the user passed is used as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from flexamem_core.host import check_budget as check_tokens
from flexamem_core.host import check_fraction, config_for_budget, default_budget, window_budget

if TYPE_CHECKING:
    from flexamem_core import FlexAMem

logger = logging.getLogger("flexamem.langgraph")

#: Tokens (an int), or ``("fraction", x)`` of the model's ``profile["max_input_tokens"]``.
BudgetSpec = int | tuple[Literal["fraction"], float] | None


def check_budget(budget: BudgetSpec) -> BudgetSpec:
    """Validate a budget given to an adapter object (a positive int or a fraction in (0, 1])."""
    if budget is None:
        return None
    if isinstance(budget, tuple) and len(budget) == 2 and budget[0] == "fraction":
        return ("fraction", check_fraction(budget[1]))
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


def resolve_budget(budget: BudgetSpec, model: Any, mem: FlexAMem, *, owned: bool = False) -> int | None:
    """The budget of one call; ``None`` means the memory's own configured budget.

    ``owned``: the adapter made ``mem`` itself, so its config's budget is not the user's.
    """
    if isinstance(budget, int):
        return budget
    limit = profile_input_tokens(model) if model is not None else None
    if budget is not None:
        if limit is None:
            raise ValueError(f"budget={budget!r} needs the model's profile['max_input_tokens'], and "
                             f"{type(model).__name__} has none: pass budget=<tokens>, or "
                             "ChatModel(..., profile={'max_input_tokens': ...})")
        return window_budget(limit, budget[1])
    if not owned and "budget" in mem.config.model_fields_set:
        return None
    return default_budget(limit, adapter="langgraph",
                          model=type(model).__name__ if model is not None else "the model",
                          hint="pass budget=<tokens>, or give the chat model profile={'max_input_tokens': ...}",
                          log=logger)


def sized_memory(mem: FlexAMem, budget: int) -> FlexAMem:
    """A memory the adapter made, sized for ``budget`` by the shared rule: ``mem`` itself when
    its config already is, else one with that config on ``mem``'s store, tokenizer, embedder
    and writer (what was written stays in the store and is matched again)."""
    config = config_for_budget(budget)
    if config == mem.config:
        return mem
    from flexamem_core import FlexAMem

    return FlexAMem(config, store=mem.store, tokenizer=mem.tokenizer, embedder=mem.embedder, writer=mem.writer)
