"""Every request a ``FunctionAgent`` loop sends, counted independently as the provider gets it.

The LLM's input is turned into the chat-completions JSON the way LlamaIndex's OpenAI
integration writes it (text blocks as ``content``, ``ToolCallBlock`` as ``tool_calls``
with ``json.dumps`` arguments, ``additional_kwargs`` such as ``tool_call_id`` merged in),
the tools by ``to_openai_tool``, and counted by :mod:`tests.wire_count`. The library's
count of the same request (``FlexAMemLLM.last_render.tokens``, tool schemas included) is
never more than 1% below it, and the request fits the budget.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from flexamem_llamaindex import agent_memory
from li_helpers import Call, ScriptedLLM, add, read_record
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.tools import FunctionTool

from tests.wire_count import request_tokens, shortfall

SYSTEM = "You are an auditor. Read every record you are asked for, then summarise. Größe, 日本, 🙂."
TOOLS = [FunctionTool.from_defaults(read_record), FunctionTool.from_defaults(add)]


@dataclass
class CountingScript(ScriptedLLM):
    """The scripted LLM, also keeping what the wrapper counted for the request it receives."""

    wrapper: Any = None
    renders: list[Any] = field(default_factory=list)

    def __call__(self, messages: Any, **kwargs: Any) -> ChatMessage:
        self.renders.append(self.wrapper.last_render)
        return super().__call__(messages, **kwargs)


def to_wire(message: ChatMessage) -> dict[str, Any]:
    """One LlamaIndex message as an OpenAI-style integration sends it."""
    out: dict[str, Any] = {"role": message.role.value, "content": message.content}
    calls = [b for b in message.blocks if isinstance(b, ToolCallBlock)]
    if calls:
        out["tool_calls"] = [{"id": b.tool_call_id, "type": "function",
                              "function": {"name": b.tool_name, "arguments": json.dumps(b.tool_kwargs)}}
                             for b in calls]
    out.update({k: v for k, v in message.additional_kwargs.items() if k != "tool_calls"})
    return out


def plan() -> list:
    steps: list = [[Call("read_record", {"record_id": 7})]]
    steps += [[Call("read_record", {"record_id": i})] for i in range(20, 32)]
    steps += [[Call("read_record", {"record_id": i}), Call("read_record", {"record_id": i + 1})] for i in (40, 42)]
    return [*steps, [Call("add", {"a": 4, "b": 4})], "Audit complete; vault code QUOKKA-4417."]


@pytest.mark.parametrize(("budget", "streaming"), [(1500, False), (2500, True)])
def test_no_request_is_counted_more_than_one_percent_low(budget: int, streaming: bool) -> None:
    script = CountingScript(plan=plan())
    memory, llm = agent_memory(script.llm(), namespace=f"li-wire-{budget}", budget=budget)
    script.wrapper = llm
    agent = FunctionAgent(tools=TOOLS, llm=llm, system_prompt=SYSTEM, streaming=streaming)

    async def run() -> None:
        await agent.run(user_msg="Audit record 7, records 20-31 and 40-43; Prüfung bitte.", memory=memory,
                        max_iterations=40)

    asyncio.run(run())
    tools = [t.metadata.to_openai_tool() for t in TOOLS]
    assert len(script.received) == len(script.renders) == len(plan())
    worst, best = -1.0, 1.0
    for rendered, received in zip(script.renders, script.received, strict=True):
        independent = request_tokens([to_wire(m) for m in received], tools)
        low = shortfall(rendered.tokens, independent)
        worst, best = max(worst, low), min(best, low)
        assert independent <= budget, f"sent {independent} tokens at budget {budget}"
    print(f"llamaindex budget {budget}: {len(script.renders)} requests, "
          f"low by {100 * best:+.2f}% to {100 * worst:+.2f}%")
    assert worst <= 0.01, f"counted {100 * worst:.2f}% low"
    assert any(not r.passthrough for r in script.renders), "the loop must outgrow the budget"
