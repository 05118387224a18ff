"""``FlexAMemLLM``: a long tool loop inside ONE ``FunctionAgent.run()`` is rendered too."""

from __future__ import annotations

import asyncio

import pytest
from flexamem_llamaindex import FlexAMemLLM, FlexAMemory, LlamaIndexCodec, to_core_list
from li_helpers import Call, ScriptedLLM, add, assert_valid_structure, dump, memory_messages, read_record
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.tools import FunctionTool

from flexamem_core.host import extra_tokens_of

BUDGET = 2000
SYSTEM = "You are an auditor. Read every record you are asked for, then summarise."
TOOLS = [FunctionTool.from_defaults(read_record), FunctionTool.from_defaults(add)]


def schema_tokens(memory: FlexAMemory) -> int:
    return extra_tokens_of(memory.engine, LlamaIndexCodec(), TOOLS)  # the tools list as sent


def long_loop_plan() -> list:
    plan: list = [[Call("read_record", {"record_id": 7})]]
    plan += [[Call("read_record", {"record_id": i})] for i in range(20, 34)]
    plan += [[Call("read_record", {"record_id": i}), Call("read_record", {"record_id": i + 1})]
             for i in (40, 42, 44)]  # parallel calls
    plan += [[Call("add", {"a": 4, "b": 4})], "Audit complete: 21 records read; vault code QUOKKA-4417."]
    return plan


@pytest.mark.parametrize("streaming", [True, False])
def test_long_tool_loop_in_one_run_is_rendered(streaming):
    script = ScriptedLLM(plan=long_loop_plan())
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace=f"li-loop-{streaming}", kind="agent")
    llm = FlexAMemLLM(script.llm(), memory)
    agent = FunctionAgent(tools=TOOLS, llm=llm, system_prompt=SYSTEM, streaming=streaming)

    async def run() -> None:
        await agent.run(user_msg="Audit record 7, records 20-33 and 40-45.", memory=memory,
                        max_iterations=40)

    asyncio.run(run())

    extra = schema_tokens(memory)
    for received in script.received:
        assert_valid_structure(received)
        assert received[0].content == SYSTEM
        assert memory.engine.count_messages(to_core_list(received), extra) <= int(0.95 * BUDGET)
        assert received[1].content.startswith("Audit record 7")  # the task stays
    last = script.received[-1]
    assert last[-1].role == MessageRole.TOOL and last[-1].content == "8"  # the newest step is there
    (mem_msg,) = memory_messages(last)
    assert "read_record" in mem_msg.content  # the timeline of earlier steps
    assert llm.renders == len(script.received) and not llm.last_render.passthrough
    # without the wrapper the last call would have carried the whole loop
    log = memory.get_all()
    assert sum(m.role == MessageRole.TOOL for m in log) == 22
    assert memory.engine.count_messages(to_core_list(log)) > BUDGET
    assert len(last) < len(log)
    assert_valid_structure(log)


def test_sync_chat_with_tools_renders_and_never_mutates():
    script = ScriptedLLM(plan=["ok"])
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-wrap-sync", kind="agent")
    llm = FlexAMemLLM(script.llm(), memory)
    history = [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content="Audit.")]
    for i in range(30):
        history.append(ChatMessage(role="assistant", blocks=[
            ToolCallBlock(tool_call_id=f"c{i}", tool_name="read_record", tool_kwargs={"record_id": i})]))
        history.append(ChatMessage(role="tool", content=read_record(i), additional_kwargs={"tool_call_id": f"c{i}"}))
    before = dump(history)
    response = llm.chat_with_tools(TOOLS, chat_history=history)
    assert response.message.content == "ok"
    assert dump(history) == before
    (received,) = script.received
    assert len(memory_messages(received)) == 1 and received[-1].content == history[-1].content
    assert_valid_structure(received)
    assert llm.metadata.is_function_calling_model
    assert llm.complete("ping").text == "ping"  # completions pass through


def test_wrapper_rejects_a_memory_it_cannot_use():
    with pytest.raises(TypeError, match="FlexAMemory"):
        FlexAMemLLM(ScriptedLLM().llm(), memory=None)  # type: ignore[arg-type]
