"""The message rules on a part of a request that follows the fixed prompt (the recent window,
the current turn): every rule applies, and any system message in it is an inner one."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model.messages import Message
from .properties import Enforced, apply_properties, no_inner_system


@dataclass(frozen=True)
class Part(Enforced):
    """A part of a request after the rules, its system turns counted as repairs."""

    inner_system: int = 0

    @property
    def repairs(self) -> int:
        return super().repairs + self.inner_system


def enforce_part(messages: Sequence[Message]) -> Part:
    """The rules on a part that follows the fixed prompt: any system message in it is an inner one."""
    inner = sum(1 for m in messages if m.role == "system")
    done = apply_properties(no_inner_system(messages) if inner else messages)
    return Part(done.messages, done.fixes, inner)
