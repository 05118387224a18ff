"""Checks of what a mini-swe-agent model received, shared by the adapter tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from flexamem_minisweagent import is_memory_dict


def role_of(message: Mapping[str, Any]) -> str:
    """The role of a chat message or of a Responses-API item."""
    if message.get("object") == "response":
        return "assistant"
    if message.get("type") == "function_call_output":
        return "tool"
    return str(message.get("role"))


def call_ids(message: Mapping[str, Any]) -> list[str]:
    """Ids of the tool calls a (chat or Responses-API) assistant message makes."""
    if message.get("object") == "response":
        return [i.get("call_id") for i in message.get("output", []) if i.get("type") == "function_call"]
    return [c["id"] for c in message.get("tool_calls") or []]


def result_id(message: Mapping[str, Any]) -> str | None:
    return message.get("tool_call_id") or message.get("call_id")


def plain(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message as an API gets it (mini-swe-agent strips ``extra``)."""
    return {k: v for k, v in message.items() if k != "extra"}


def assert_pairing(sent: Sequence[Mapping[str, Any]]) -> None:
    """Every tool call is followed by all its results; no result without its call."""
    i = 0
    while i < len(sent):
        ids = call_ids(sent[i]) if role_of(sent[i]) == "assistant" else []
        if role_of(sent[i]) == "tool":
            raise AssertionError(f"orphan tool result at {i}: {plain(sent[i])}")
        if ids:
            results = sent[i + 1:i + 1 + len(ids)]
            assert [role_of(m) for m in results] == ["tool"] * len(ids), f"calls at {i} lack results"
            assert sorted(result_id(m) for m in results) == sorted(ids)
            i += len(ids)
        i += 1


def assert_valid_structure(sent: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]) -> None:
    """One system message first, the task kept, at most one memory message right after it,
    tool pairing intact and the current turn (the newest message) sent last."""
    roles = [role_of(m) for m in sent]
    assert roles[0] == "system" and roles.count("system") == 1, roles
    assert plain(sent[0]) == plain(history[0])
    assert plain(sent[1]) == plain(history[1])
    memories = [i for i, m in enumerate(sent) if is_memory_dict(m)]
    assert len(memories) <= 1, memories
    if memories:  # after the task; a head (the oldest steps, where they were first sent) may come between
        assert [plain(m) for m in sent[2:memories[0]]] == [plain(m) for m in history[2:memories[0]]]
    assert_pairing(sent)
    assert plain(sent[-1]) == plain(history[-1]) or CUT_MARK in str(sent[-1].get("content"))


def memory_index(sent: Sequence[Mapping[str, Any]]) -> int:
    """Where the memory message is in a request (after the task and any head)."""
    return next(i for i, m in enumerate(sent) if is_memory_dict(m))


def memory_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content)
    return str(content)


CUT_MARK = "omitted by FlexA-Mem"


def assert_window_is_tail(window: Sequence[Mapping[str, Any]], history: Sequence[Mapping[str, Any]]) -> None:
    """The recent window is the newest messages of the history, unchanged or (when the newest
    step alone exceeds the budget) with an output cut in the middle and marked. The newest
    user message may come first, pinned, when the window itself holds no user message."""
    users = [m for m in history[2:] if role_of(m) == "user"]
    if window and users and plain(window[0]) == plain(users[-1]) and not any(
            role_of(m) == "user" for m in window[1:]) and plain(window[0]) != plain(history[-len(window)]):
        window = window[1:]
    tail = history[len(history) - len(window):]
    for sent, original in zip(window, tail):
        if plain(sent) != plain(original):
            assert CUT_MARK in str(sent.get("content")), (plain(sent), plain(original))
            assert {k: v for k, v in plain(sent).items() if k != "content"} == \
                {k: v for k, v in plain(original).items() if k != "content"}
