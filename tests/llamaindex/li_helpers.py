"""Offline drivers for the LlamaIndex tests: a scripted function-calling mock LLM and real tools.

The script is LlamaIndex's own ``MockFunctionCallingLLM`` with a response generator that
plays a planned sequence of actions (tool calls or a final answer) and records a deep
copy of every message list the LLM received, which is what the tests assert on.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, LLMMetadata, MessageRole, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM

MEMORY_TAG = "<memory>"

_WORDS = ["invoice", "shipment", "warehouse", "pallet", "customer", "ledger", "audit", "carrier",
          "route", "depot", "battery", "sensor", "firmware", "valve", "pressure", "reading",
          "calibration", "batch", "supplier"]


def record_text(record_id: int, words: int = 90) -> str:
    """A deterministic, word-rich record (about ``words`` words) for the ``read_record`` tool."""
    rng = random.Random(record_id)
    body = " ".join(rng.choice(_WORDS) for _ in range(words))
    digest = hashlib.sha256(str(record_id).encode()).hexdigest()[:8]
    return f"Record {record_id} (checksum {digest}): {body}."


def read_record(record_id: int) -> str:
    """Read one stored record by its numeric id."""
    if record_id == 7:
        return "Record 7: the vault access code is QUOKKA-4417, rotated by Dana Whitfield on 2024-03-05."
    return record_text(record_id)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@dataclass
class Call:
    """One planned tool call."""

    name: str
    kwargs: dict[str, Any]


@dataclass
class ScriptedLLM:
    """Plays planned actions; each action is a list of tool calls (parallel) or a final text."""

    plan: list[list[Call] | str] = field(default_factory=list)
    received: list[list[ChatMessage]] = field(default_factory=list)
    tools_seen: list[list[str]] = field(default_factory=list)
    ids: int = 0

    def llm(self, context_window: int | None = None, **kwargs: Any) -> MockFunctionCallingLLM:
        """LlamaIndex's mock LLM playing this script; ``context_window`` (else the mock's 3,900)
        is the window it reports, which engines size their prompts by."""
        if context_window is None:
            return MockFunctionCallingLLM(response_generator=self, **kwargs)
        return WindowedMockLLM(response_generator=self, window=context_window, **kwargs)

    def __call__(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
        self.received.append(copy.deepcopy(list(messages)))
        self.tools_seen.append([t.metadata.name for t in kwargs.get("tools") or []])
        if not self.plan:
            return ChatMessage(role=MessageRole.ASSISTANT, content="Done.")
        action = self.plan.pop(0)
        if isinstance(action, str):
            return ChatMessage(role=MessageRole.ASSISTANT, content=action)
        blocks = []
        for call in action:
            self.ids += 1
            blocks.append(ToolCallBlock(tool_call_id=f"call-{self.ids}", tool_name=call.name,
                                        tool_kwargs=call.kwargs))
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)


class WindowedMockLLM(MockFunctionCallingLLM):
    """``MockFunctionCallingLLM`` reporting a context window of ``window`` tokens, as a real model does."""

    window: int = 3900

    @property
    def metadata(self) -> LLMMetadata:
        return super().metadata.model_copy(update={"context_window": self.window})


def text_of(message: ChatMessage) -> str:
    return message.content or ""


def memory_messages(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if m.role == MessageRole.USER and text_of(m).startswith(MEMORY_TAG)]


def call_ids(message: ChatMessage) -> list[str]:
    ids = [b.tool_call_id for b in message.blocks if isinstance(b, ToolCallBlock)]
    for entry in message.additional_kwargs.get("tool_calls") or []:
        ids.append(entry["id"] if isinstance(entry, dict) else getattr(entry, "tool_id", None)
                   or getattr(entry, "id", None))
    return [i for i in ids if i]


def assert_valid_structure(messages: Sequence[ChatMessage], *, complete: bool = True) -> None:
    """One system message, first; every tool result right after the call it answers; with
    ``complete``, every tool call answered (true of any list an agent sends to its LLM)."""
    roles = [m.role for m in messages]
    assert roles.count(MessageRole.SYSTEM) <= 1, roles
    if MessageRole.SYSTEM in roles:
        assert roles[0] == MessageRole.SYSTEM, roles
    open_calls: set[str] = set()
    for i, m in enumerate(messages):
        if m.role == MessageRole.TOOL:
            call_id = m.additional_kwargs.get("tool_call_id")
            assert call_id in open_calls, f"orphan tool result {call_id} at {i}: {roles}"
            open_calls.discard(call_id)
            continue
        if complete:
            assert not open_calls, f"unanswered tool calls {open_calls} before message {i}"
        open_calls = set(call_ids(m)) if m.role == MessageRole.ASSISTANT else set()
    if complete:
        assert not open_calls, f"unanswered tool calls {open_calls} at the end"


def dump(messages: Sequence[ChatMessage]) -> str:
    """A comparable snapshot of messages (to check nothing was mutated)."""
    return json.dumps([m.model_dump(mode="json") for m in messages], sort_keys=True)
