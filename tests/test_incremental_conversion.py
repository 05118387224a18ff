"""A host history converted once (flexamem_core.host.incremental), through every adapter's codec.

Whatever a host does to its list between calls (append a step, edit a message in place,
replace one, remove one, start over), the memo's conversion equals a fresh conversion of the
same list; and a growing history rendered through ``render_host`` gives the same request as
the same history rebuilt from new objects on every call, which nothing can be reused from.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig, InMemoryStore, Message, ToolCall
from flexamem_core.host import render_host
from flexamem_core.host.incremental import ConversionMemo


def _core_step(i: int) -> list[Message]:
    call = ToolCall(name="shell", arguments=json.dumps({"command": f"cat src/mod_{i}.py"}), id=f"c{i}")
    out = "\n".join(f"src/mod_{i}.py:{j}: value_{i}_{j} = f({j})" for j in range(30))
    return [Message(role="assistant", content=f"Reading mod_{i}", tool_calls=(call,), id=f"a{i}"),
            Message(role="tool", content=out, tool_call_id=f"c{i}", name="shell", id=f"t{i}")]


START = [Message(role="system", content="You are a coding agent.", id="s"),
         Message(role="user", content="Fix the failing test.", id="u")]


def _minisweagent() -> tuple[Any, Callable[[Message], Any], Callable[[Any, str], None]]:
    from flexamem_minisweagent.convert import CODEC

    from flexamem_core.request.wire import chat_message

    def edit(d: dict, text: str) -> None:
        d["content"] = text

    return CODEC, chat_message, edit


def _langchain() -> tuple[Any, Callable[[Message], Any], Callable[[Any, str], None]]:
    from flexamem_langgraph.convert import LangChainCodec, from_core_message

    def edit(m: Any, text: str) -> None:
        m.content = text

    return LangChainCodec(), from_core_message, edit


def _llamaindex() -> tuple[Any, Callable[[Message], Any], Callable[[Any, str], None]]:
    from flexamem_llamaindex.convert import LlamaIndexCodec
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock

    roles = {"system": MessageRole.SYSTEM, "user": MessageRole.USER, "assistant": MessageRole.ASSISTANT}

    def host(m: Message) -> ChatMessage:
        if m.role == "tool":
            return ChatMessage(role=MessageRole.TOOL, content=m.text,
                               additional_kwargs={"tool_call_id": m.tool_call_id})
        return ChatMessage(role=roles[m.role], blocks=[TextBlock(text=m.text), *(
            ToolCallBlock(tool_call_id=c.id, tool_name=c.name, tool_kwargs=json.loads(c.arguments))
            for c in m.tool_calls)])

    def edit(m: Any, text: str) -> None:
        m.blocks = [TextBlock(text=text)]  # what ChatMessage's content setter does

    return LlamaIndexCodec(), host, edit


CODECS = {"minisweagent": _minisweagent, "langchain": _langchain, "llamaindex": _llamaindex}


@pytest.mark.parametrize("name", sorted(CODECS))
def test_the_memo_converts_as_a_fresh_conversion_whatever_the_host_did(name: str) -> None:
    codec, host, edit = CODECS[name]()
    memo = ConversionMemo()
    rng = random.Random(7)
    step = 0
    history = [host(m) for m in START]
    for _ in range(300):
        op = rng.choice(["append", "append", "append", "again", "edit", "replace", "remove", "restart"])
        if op == "append" or len(history) < 4:
            history += [host(m) for m in _core_step(step)]
            step += 1
        elif op == "edit":  # in place: the host object stays, its content changes
            edit(history[rng.randrange(2, len(history))], f"edited {step}")
        elif op == "replace":
            i = rng.randrange(2, len(history))
            history[i] = copy.deepcopy(history[i])
            edit(history[i], f"replaced {step}")
        elif op == "remove":
            del history[rng.randrange(2, len(history))]
        elif op == "restart":
            history = [host(m) for m in START]
        got = memo.convert(codec, history)
        expected = codec.to_core(history)
        assert got.messages == expected.messages, op
        assert codec.to_host(got.messages, got) == codec.to_host(expected.messages, expected)


@pytest.mark.parametrize("name", sorted(CODECS))
def test_a_growing_history_renders_as_the_same_history_made_of_new_objects(name: str, hashing_embedder) -> None:
    codec, host, _ = CODECS[name]()
    grown = FlexAMem(FlexAMemConfig(budget=1500), store=InMemoryStore(), embedder=hashing_embedder)
    fresh = FlexAMem(FlexAMemConfig(budget=1500), store=InMemoryStore(), embedder=hashing_embedder)
    core = list(START)
    history = [host(m) for m in core]
    rendered = 0
    for i in range(30):
        new = _core_step(i)
        core += new
        history += [host(m) for m in new]  # the loop appends to its own list
        a = render_host(grown, codec, history, namespace="t")
        b = render_host(fresh, codec, [host(m) for m in core], namespace="t")  # all new objects
        assert a.rendered.messages == b.rendered.messages and a.report == b.report
        rendered += not a.rendered.passthrough
    assert rendered > 10
