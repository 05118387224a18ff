"""One system message, and only first: providers reject or misread any other."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...model.messages import Message
from .base import Context, MessageProperty


def one_system(messages: Sequence[Message]) -> Message | None:
    """Leading system messages joined into one (a copy); None when there is none."""
    if not messages:
        return None
    if len(messages) == 1:
        return messages[0]
    return replace(messages[0], content="\n\n".join(m.text for m in messages))


def no_inner_system(messages: Sequence[Message]) -> list[Message]:
    """System messages inside the history become user messages (copies) marked [system]."""
    return [replace(m, role="user", content=f"[system] {m.text}") if m.role == "system" else m
            for m in messages]


class OneSystemFirst(MessageProperty):
    name = "one_system_first"
    rule = "at most one system message, and it is the first (leading ones joined, later ones marked user turns)"

    def problem(self, messages: Sequence[Message], context: Context | None = None) -> str | None:
        at = [i for i, m in enumerate(messages) if m.role == "system"]
        return None if at in ([], [0]) else f"system messages at {at}"

    def enforce(self, messages: Sequence[Message]) -> tuple[list[Message], int]:
        lead = 0
        while lead < len(messages) and messages[lead].role == "system":
            lead += 1
        head = [one_system(messages[:lead])] if lead else []
        rest = no_inner_system(messages[lead:])
        fixes = max(0, lead - 1) + sum(1 for a, b in zip(messages[lead:], rest) if a is not b)
        return [*head, *rest] if fixes else list(messages), fixes  # type: ignore[list-item]
