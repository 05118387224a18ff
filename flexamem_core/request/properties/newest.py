"""The newest step is sent as it was given, unless the report says it was cut or repaired.

The newest step is what the model must answer (an agent's last action and its results,
or a reader's current turn): it is never summarised or dropped. It may only be cut in
the middle with the visible mark when it alone exceeds the budget (or, being the task or
the current turn, the room the budget leaves it: ``task_cut_messages``), or repaired by the
message rules (a placeholder result, an orphan result marked); the report's
``newest_step`` then says ``"cut"`` or ``"repaired"``. Sanitising its text (see
``sendable``) is not a change: that is how it is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...model.messages import Message
from .base import Context, MessageProperty
from .sendable import sendable

TRUNCATED = "flexamem_truncated"


def newest_step(source: Sequence[Message], kind: str = "agent") -> list[Message]:
    """Agents: the last assistant message and what follows it; readers: the current turn."""
    role = "assistant" if kind == "agent" else "user"
    last = next((i for i in range(len(source) - 1, -1, -1) if source[i].role == role), None)
    if last is None or (kind == "agent" and last == 0):
        return list(source[-1:])
    return list(source[last:])


def _same(a: Message, b: Message) -> bool:
    return (a.role, a.content, a.tool_calls, a.tool_call_id, a.name) == (b.role, b.content, b.tool_calls,
                                                                         b.tool_call_id, b.name)


def step_status(messages: Sequence[Message], source: Sequence[Message], kind: str = "agent") -> str:
    """``unchanged`` when the request ends with the newest step as sent, else ``cut`` or ``repaired``."""
    step = [sendable(m) for m in newest_step(source, kind)]
    sent = newest_step(messages, kind)
    if len(sent) == len(step) and all(_same(a, b) for a, b in zip(sent, step)):
        return "unchanged"
    if any(m.metadata.get(TRUNCATED) for m in sent):
        return "cut"
    return "repaired"


class NewestStepUnchanged(MessageProperty):
    name = "newest_step_unchanged"
    rule = "the newest step is sent as given, unless the report says it was cut (marked) or repaired"

    def problem(self, messages: Sequence[Message], context: Context | None = None) -> str | None:
        if context is None or not context.source:
            return None
        status = step_status(messages, context.source, context.kind)
        said: Any = context.report.get("newest_step", "unchanged")
        if status == "unchanged":
            return None
        if said != status:
            return f"the newest step was {status} but the report says {said!r}"
        if status == "cut" and not (context.report.get("newest_unit_cut_messages")
                                    or context.report.get("task_cut_messages")):
            return "the newest step was cut but the report counts no cut message"
        if status == "repaired" and not context.report.get("pairing_repairs"):
            return "the newest step was repaired but the report counts no repair"
        return None

    def enforce(self, messages: Sequence[Message]) -> tuple[list[Message], int]:
        """Nothing to do on a request alone: the render keeps the newest step (see ``memory``)."""
        return list(messages), 0
