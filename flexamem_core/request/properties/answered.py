"""Every tool call has its own result: matched by id, else by position in its own step.

A result without an id belongs to the call it follows, not to whichever call is open
first: the k-th id-less result of a step answers the k-th call of that step still
without a result (calls whose id FlexA-Mem had to give first, since those are the ones
an id-less result was written for). A call left without any result gets a marked
placeholder, so the provider accepts the request and the model is told nothing came back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...model.messages import Message
from .base import CALL_ID_PREFIX, NO_RESULT, Context, MessageProperty, call_ids, spans


class EveryCallAnswered(MessageProperty):
    name = "every_call_answered"
    rule = "every tool call has a result with its id in its own step (id-less results matched by position)"

    def problem(self, messages: Sequence[Message], context: Context | None = None) -> str | None:
        for span in spans(messages):
            ids = call_ids(messages[span.start])
            answered = {messages[i].tool_call_id for i in span[1:] if messages[i].role == "tool"}
            missing = [c for c in ids if c is None or c not in answered]
            if missing:
                return f"message {span.start}: tool calls without a result: {missing}"
        return None

    def enforce(self, messages: Sequence[Message]) -> tuple[list[Message], int]:
        out = list(messages)
        fixes = 0
        inserts: list[tuple[int, list[Message]]] = []
        for span in spans(out):
            ids = [c for c in call_ids(out[span.start]) if c is not None]
            if not ids:
                continue
            answered = {out[i].tool_call_id for i in span[1:] if out[i].role == "tool"} & set(ids)
            open_ids = [c for c in ids if c not in answered]
            open_ids.sort(key=lambda c: not c.startswith(CALL_ID_PREFIX))  # stable: call order kept
            last = span.start
            for i in span[1:]:
                m = out[i]
                if m.role != "tool":
                    continue
                if m.tool_call_id is None and open_ids:
                    out[i] = replace(m, tool_call_id=open_ids.pop(0))
                    fixes += 1
                if out[i].tool_call_id in ids:
                    last = i
            if open_ids:
                order = {c: k for k, c in enumerate(ids)}
                inserts.append((last + 1, [Message(role="tool", content=NO_RESULT, tool_call_id=c,
                                                   metadata={"flexamem": "placeholder"})
                                           for c in sorted(open_ids, key=order.__getitem__)]))
                fixes += len(open_ids)
        for at, placeholders in reversed(inserts):
            out[at:at] = placeholders
        return out, fixes
