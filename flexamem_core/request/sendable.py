"""One definition of what is sent: every request obeys the message rules, and is counted as sent.

A history below the budget is not sent as given when it breaks a rule (a NUL byte, an
open tool call, a second system message): it gets the same rules as a rendered request,
so what passes through is what the provider accepts, and its count is of the copy sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..config import FlexAMemConfig
from ..model.messages import Message
from ..model.protocols import Tokenizer
from .budget import check_extra_tokens
from .properties import Enforced, apply_properties, no_inner_system
from .render import Rendered, count_messages

__all__ = ["PINNED_MIN_TOKENS", "Part", "check_extra_tokens", "enforce_part", "passthrough"]

#: The least a cut pinned user turn keeps (head, mark and tail).
PINNED_MIN_TOKENS = 64


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
