"""The host boundary (``flexamem_core.host``): what every adapter builds on, tested with a plain codec.

The codec here is the smallest a framework could write (OpenAI-style dicts, the memory
message marked in an ``extra`` field that is never sent); it is test code, the boundary
under it is the library's.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from flexamem_core import Message
from flexamem_core.host import (
    MEMORY_ID,
    BudgetError,
    HostCodec,
    arender_host,
    check_budget,
    check_room,
    extra_tokens_of,
    is_marked,
    mark,
    render_host,
    tool_schema_tokens,
    wire_json,
)
from flexamem_core.request.marker import memory_message

from .checks import steps


@dataclass(frozen=True)
class DictHistory:
    messages: list[Message]
    originals: dict[str, Mapping[str, Any]]


class DictCodec:
    """OpenAI-style dicts; each message's position is its id; the memory marked in ``extra``."""

    def __init__(self) -> None:
        self.reads = 0

    def to_core(self, messages: Sequence[Mapping[str, Any]]) -> DictHistory:
        self.reads += 1
        core = [Message.from_dict({**m, "id": str(i)}) for i, m in enumerate(messages)]
        return DictHistory(core, {str(i): m for i, m in enumerate(messages)})

    def to_host(self, rendered: Sequence[Message], converted: DictHistory) -> list[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        for m in rendered:
            if is_marked(m.metadata):
                out.append({"role": "user", "content": m.text, "extra": mark()})
            elif m.id in converted.originals and m == converted.messages[int(m.id)]:
                out.append(converted.originals[m.id])
            else:
                out.append({"role": m.role, "content": m.text})
        return out

    def tool_schema(self, tool: Any) -> dict[str, Any]:
        return {"type": "function", "function": {"name": tool.__name__, "description": tool.__doc__ or ""}}


def read_file(path: str) -> str:
    """Read a file."""
    return path


def history() -> list[dict]:
    return [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."},
            *steps(12, size=60)]


def test_the_codec_protocol_is_what_adapters_implement():
    codec: HostCodec[Mapping[str, Any], DictHistory] = DictCodec()
    assert codec.to_core(history()).messages[0].role == "system"


def test_one_mark_for_the_memory_message():
    assert is_marked(mark()) and is_marked(mark({"other": 1})) and mark({"other": 1})["other"] == 1
    assert not is_marked({}) and not is_marked(None) and not is_marked("memory")
    m = memory_message("<memory>\nx\n</memory>")
    assert is_marked(m.metadata) and m.id == MEMORY_ID


def test_tool_schemas_are_counted_as_the_request_carries_them(tokenizer):
    schemas = [{"type": "function", "function": {"name": "f", "description": "Größe 🙂", "parameters": {}}}]
    assert wire_json(schemas) == json.dumps(schemas, ensure_ascii=False, separators=(",", ":"))
    assert tool_schema_tokens(schemas, tokenizer) == tokenizer.count(wire_json(schemas))
    # never fewer than the schemas one by one (the list's commas can merge with its braces)
    same = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}] * 4
    assert tool_schema_tokens(same, tokenizer) >= 4 * tokenizer.count(wire_json(same[0]))
    assert tool_schema_tokens([], tokenizer) == tool_schema_tokens(None, tokenizer) == 0


def test_the_one_budget_check():
    assert check_budget(None) is None and check_budget(5) == 5
    for bad in (0, -1, True, 2.5, "8000"):
        with pytest.raises(BudgetError, match="positive integer"):
            check_budget(bad)
    assert check_room(100, 99) == 99
    with pytest.raises(BudgetError, match="exceeds token limit 100"):
        check_room(100, 100)
    with pytest.raises(BudgetError, match=">= 0"):
        check_room(100, -1)


def test_sync_and_async_render_the_same_request(mem, tokenizer):
    h = history()
    before = copy.deepcopy(h)
    codec = DictCodec()
    sync = render_host(mem(budget=1200), codec, h, namespace="host-a", tools=[read_file])
    done = asyncio.run(arender_host(mem(budget=1200), codec, h, namespace="host-a", tools=[read_file]))
    assert h == before
    assert sync.messages == done.messages and sync.rendered.tokens == done.rendered.tokens
    assert not sync.rendered.passthrough and sync.report["total_tokens"] == sync.rendered.tokens
    assert sum(is_marked(m.get("extra")) for m in sync.messages) == 1
    assert sync.messages[-1] is h[-1]  # the host's own objects for what is unchanged
    schemas = [codec.tool_schema(read_file)]
    assert extra_tokens_of(mem(), codec, [read_file]) == tool_schema_tokens(schemas, tokenizer)


def test_the_namespace_may_come_from_the_converted_history(mem):
    seen: list[int] = []

    def namespace(converted: DictHistory) -> str:
        seen.append(len(converted.messages))
        return f"task-{len(converted.messages[1].text)}"

    out = render_host(mem(budget=5000), DictCodec(), history()[:4], namespace=namespace)
    assert out.namespace == "task-12" and seen == [4] and out.rendered.passthrough


def test_an_empty_history_renders_nothing_and_bad_budgets_fail_before_converting(mem):
    codec = DictCodec()
    out = render_host(mem(), codec, [], namespace="empty")
    assert out.messages == [] and out.rendered is None and out.report == {}
    with pytest.raises(BudgetError, match="exceeds token limit"):
        render_host(mem(budget=100), codec, history(), namespace="x", extra_tokens=100)
    with pytest.raises(BudgetError, match="positive integer"):
        render_host(mem(), codec, history(), namespace="x", budget=0)
    assert codec.reads == 1
