"""The one budget check of a host call, and the error every budget problem raises.

A host hands the core a budget and the tokens it adds outside the messages (its system
prompt when it sends it apart, its tool schemas). Both are checked here, before anything
is converted or rendered, the same way for every adapter: a budget is a positive integer,
the extra tokens a non-negative integer below it.
"""

from __future__ import annotations

import numbers


class BudgetError(ValueError):
    """The budget cannot hold the fixed prompt (system prompt, tool schemas, the marks of a cut
    task), or a budget or ``extra_tokens`` value is not a valid number of tokens."""


def check_budget(budget: object, name: str = "budget") -> int | None:
    """``budget`` as an int (``None`` stays ``None``: the memory's own), or :class:`BudgetError`."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or budget <= 0:
        raise BudgetError(f"{name} must be a positive integer, got {budget!r}")
    return int(budget)


def check_extra_tokens(extra_tokens: object) -> int:
    """``extra_tokens`` as an int, or :class:`BudgetError` for a negative or non-integer value."""
    if isinstance(extra_tokens, bool) or not isinstance(extra_tokens, numbers.Integral):
        raise BudgetError(f"extra_tokens must be an int >= 0, not {type(extra_tokens).__name__}")
    if extra_tokens < 0:
        raise BudgetError(f"extra_tokens must be >= 0, got {extra_tokens}")
    return int(extra_tokens)


def check_room(budget: int, extra_tokens: object) -> int:
    """``extra_tokens``, checked to leave room under ``budget`` for at least one message."""
    extra = check_extra_tokens(extra_tokens)
    if extra >= budget:
        raise BudgetError(f"the host's extra token count {extra} (system prompt, tool schemas) "
                          f"exceeds token limit {budget}")
    return extra
