"""Nothing between a call and its results: providers require the results right after it.

A user or system message that sits between a call and its result is moved after the
results (its text is kept), instead of leaving the call unanswered and the result orphaned.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...model.messages import Message
from .base import Context, MessageProperty, call_ids, spans


def _answers(messages: Sequence[Message], span: range) -> list[int]:
    """Positions of the first result of each call of the step, in their order."""
    ids = set(call_ids(messages[span.start])) - {None}
    out, seen = [], set()
    for i in span[1:]:
        m = messages[i]
        if m.role == "tool" and m.tool_call_id in ids and m.tool_call_id not in seen:
            seen.add(m.tool_call_id)
            out.append(i)
    return out


class ResultsFollowCalls(MessageProperty):
    name = "results_follow_calls"
    rule = "the results of a step's tool calls come right after the call, before any other message"

    def problem(self, messages: Sequence[Message], context: Context | None = None) -> str | None:
        for span in spans(messages):
            answers = _answers(messages, span)
            if answers != list(range(span.start + 1, span.start + 1 + len(answers))):
                return f"message {span.start}: another message sits between the call and its results"
        return None

    def enforce(self, messages: Sequence[Message]) -> tuple[list[Message], int]:
        out: list[Message] = []
        fixes = 0
        for span in spans(messages):
            answers = _answers(messages, span)
            if answers == list(range(span.start + 1, span.start + 1 + len(answers))):
                out.extend(messages[i] for i in span)
                continue
            chosen = set(answers)
            out.append(messages[span.start])
            out.extend(messages[i] for i in answers)
            out.extend(messages[i] for i in span[1:] if i not in chosen)
            fixes += 1
        return out, fixes
