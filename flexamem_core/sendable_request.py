"""One definition of what is sent: every request obeys the message rules, and is counted as sent.

A history below the budget is not sent as given when it breaks a rule (a NUL byte, an
open tool call, a second system message): it gets the same rules as a rendered request,
so what passes through is what the provider accepts, and its count is of the copy sent.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

from .config import FlexAMemConfig
from .messages import Message
from .properties import Enforced, apply_properties, no_inner_system
from .protocols import Tokenizer
from .render import BudgetError, Rendered, count_messages

#: The least a cut pinned user turn keeps (head, mark and tail).
PINNED_MIN_TOKENS = 64


def check_extra_tokens(extra_tokens: object) -> int:
    """``extra_tokens`` as an int, or :class:`BudgetError` for a negative or non-integer value."""
    if isinstance(extra_tokens, bool) or not isinstance(extra_tokens, numbers.Integral):
        raise BudgetError(f"extra_tokens must be an int >= 0, not {type(extra_tokens).__name__}")
    if extra_tokens < 0:
        raise BudgetError(f"extra_tokens must be >= 0, got {extra_tokens}")
    return int(extra_tokens)


@dataclass(frozen=True)
class Part(Enforced):
    """A part of a request (window, current turn) after the rules, system turns counted as repairs."""

    inner_system: int = 0

    @property
    def repairs(self) -> int:
        return super().repairs + self.inner_system


def enforce_part(messages: Sequence[Message]) -> Part:
    """The rules on a part that follows the fixed prompt: any system message in it is an inner one."""
    inner = sum(1 for m in messages if m.role == "system")
    done = apply_properties(no_inner_system(messages) if inner else messages)
    return Part(done.messages, done.fixes, inner)


def passthrough(history: Sequence[Message], cfg: FlexAMemConfig, tokenizer: Tokenizer,
                extra_tokens: int) -> Rendered | None:
    """The history itself as sent (the rules applied), or None when that copy is over the budget."""
    sent = apply_properties(history)
    total = count_messages(sent.messages, tokenizer, extra_tokens)
    if total > cfg.effective_budget:
        return None  # a repair (a placeholder result) took it over: render instead
    report = {"passthrough": True, "budget": cfg.budget, "total_tokens": total, "pairing_repairs": sent.repairs,
              "sanitised_messages": sent.sanitised}
    return Rendered(sent.messages, None, total, report, passthrough=True)
