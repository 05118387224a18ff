"""Every tool call has an id, unique in the request, so each result names its own call.

A call without an id (or with one already used) gets a deterministic one; a result that
names a repeated id goes to the call it follows: the first such result to the first call
with that id in its step, and so on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ...model.messages import Message
from .base import CALL_ID_PREFIX, Context, MessageProperty, spans


class UniqueCallIds(MessageProperty):
    name = "unique_call_ids"
    rule = "every tool call has an id, and no id is used twice in the request"

    def problem(self, messages: Sequence[Message], context: Context | None = None) -> str | None:
        seen: set[str] = set()
        for i, m in enumerate(messages):
            for c in m.tool_calls if m.role == "assistant" else ():
                if c.id is None or c.id in seen:
                    return f"message {i}: tool call id {c.id!r} missing or repeated"
                seen.add(c.id)
        return None

    def enforce(self, messages: Sequence[Message]) -> tuple[list[Message], int]:
        out = list(messages)
        every = {c.id for m in messages for c in m.tool_calls if c.id is not None}
        seen: set[str] = set()
        fixes = 0
        for span in spans(out):
            head = out[span.start]
            if head.role != "assistant" or not head.tool_calls:
                continue
            calls = []
            given: dict[str, list[str]] = {}  # an id as written -> the ids its results take, in call order
            for k, c in enumerate(head.tool_calls):
                new_id = c.id
                if new_id is None or new_id in seen:
                    new_id = f"{CALL_ID_PREFIX}{span.start}_{k}"
                    while new_id in seen or new_id in every:
                        new_id += "_"
                    fixes += 1
                if c.id is not None:
                    given.setdefault(c.id, []).append(new_id)
                seen.add(new_id)
                calls.append(c if new_id == c.id else replace(c, id=new_id))
            if all(a is b for a, b in zip(calls, head.tool_calls)):
                continue
            out[span.start] = replace(head, tool_calls=tuple(calls))
            for i in span[1:]:
                m = out[i]
                if m.role == "tool" and m.tool_call_id is not None and given.get(m.tool_call_id):
                    new_id = given[m.tool_call_id].pop(0)
                    if new_id != m.tool_call_id:
                        out[i] = replace(m, tool_call_id=new_id)
        return out, fixes
