"""No orphan results: a tool message answers a call of the step it is in, once.

A result with no call to answer (its call is not in the request, a second result for the
same call, or one after the step's other messages) is a 400 from the provider: it is sent
as a user message marked as such, so its text is still seen.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...model.messages import Message
from .base import ORPHAN_MARK, Context, MessageProperty


def _orphans(messages: Sequence[Message]) -> list[int]:
    out: list[int] = []
    open_ids: set[str | None] = set()
    in_results = False
    for i, m in enumerate(messages):
        if m.role == "assistant":
            open_ids = {c.id for c in m.tool_calls} - {None}
            in_results = True
        elif m.role == "tool":
            if in_results and m.tool_call_id in open_ids:
                open_ids.discard(m.tool_call_id)
            else:
                out.append(i)
        else:
            in_results = False
    return out


class NoOrphanResults(MessageProperty):
    name = "no_orphan_results"
    rule = "every tool result answers a call of its own step, once, right after the call"

    def problem(self, messages: Sequence[Message], context: Context | None = None) -> str | None:
        bad = _orphans(messages)
        return f"orphan tool results at {bad}" if bad else None

    def enforce(self, messages: Sequence[Message]) -> tuple[list[Message], int]:
        bad = set(_orphans(messages))
        if not bad:
            return list(messages), 0
        out = [Message(role="user", content=f"{ORPHAN_MARK} {m.text}", id=m.id,
                       metadata={"flexamem": "orphan-result"}) if i in bad else m
               for i, m in enumerate(messages)]
        return out, len(bad)
