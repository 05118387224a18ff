"""The message-structure checks every core test asserts, written once."""

from __future__ import annotations

from flexamem_core import Message


def pairing_problem(messages: list[Message]) -> str | None:
    """Why tool calls and results do not pair up (None when they do): every call has a
    unique id and its results follow it before any other message; no orphan result."""
    open_ids: list[str] = []
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id not in open_ids:
                return f"orphan tool result {m.tool_call_id!r}"
            open_ids.remove(m.tool_call_id)
            continue
        if open_ids:
            return f"tool calls without results: {open_ids}"
        if m.role == "assistant" and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            if any(i is None for i in ids) or len(set(ids)) != len(ids):
                return f"missing or repeated tool call ids: {ids}"
            open_ids = list(ids)  # type: ignore[arg-type]
    return f"tool calls without results: {open_ids}" if open_ids else None


def structure_problem(messages: list[Message]) -> str | None:
    """Pairing problems, or more than one system message, or one that is not first."""
    systems = [i for i, m in enumerate(messages) if m.role == "system"]
    if systems not in ([], [0]):
        return f"system messages at {systems}"
    return pairing_problem(messages)
