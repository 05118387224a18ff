"""End to end: LlamaIndex's real ``FunctionAgent`` / ``AgentWorkflow`` loop with ``FlexAMemory``,
driven offline by ``MockFunctionCallingLLM`` and real Python tools."""

from __future__ import annotations

import asyncio
import json

import pytest
from flexamem_llamaindex import FlexAMemory, to_core_list
from li_helpers import Call, ScriptedLLM, add, assert_valid_structure, memory_messages, read_record
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import MessageRole
from llama_index.core.workflow import Context, JsonSerializer

BUDGET = 2000
SYSTEM = "You are a records assistant. Use the tools, then answer briefly."
VAULT = "What was the vault access code in record 7? Check with the add tool first."


def plan_for(record_id: int) -> list:
    return [[Call("read_record", {"record_id": record_id})],
            f"Record {record_id} is read; its checksum and items are noted."]


async def run_turns(agent, script: ScriptedLLM, memory: FlexAMemory, ctx: Context | None = None,
                    records=range(10, 24)) -> None:
    script.plan += plan_for(7)
    await agent.run(user_msg="Read record 7.", memory=memory, ctx=ctx)
    for i in records:
        script.plan += plan_for(i)
        await agent.run(user_msg=f"Read record {i}.", memory=memory, ctx=ctx)


def check_calls(script: ScriptedLLM, memory: FlexAMemory) -> None:
    """Every LLM input is valid and what the memory returned fits the budget; later ones carry
    the memory, not the history. ``FunctionAgent`` adds its system prompt and the current run's
    scratchpad (everything after the user's message) uncounted: only ``FlexAMemLLM`` bounds
    those too (``test_li_llm.py``); counted as sent, they take this loop about 2% over."""
    for received in script.received:
        assert_valid_structure(received)
        assert received[0].role == MessageRole.SYSTEM and received[0].content == SYSTEM
        turn = max(i for i, m in enumerate(received) if m.role == MessageRole.USER)
        assert memory.engine.count_messages(to_core_list(received[1:turn + 1])) <= int(0.95 * BUDGET)
    late = script.received[-1]
    assert len(memory_messages(late)) == 1
    assert len(late) < len(memory.get_all())


@pytest.mark.parametrize("streaming", [True, False])
def test_function_agent_sees_rendered_memory_and_keeps_the_full_log(streaming):
    script = ScriptedLLM()
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace=f"li-agent-{streaming}")
    agent = FunctionAgent(tools=[read_record, add], llm=script.llm(), system_prompt=SYSTEM,
                          streaming=streaming)

    async def scenario() -> None:
        await run_turns(agent, script, memory)
        script.plan += [[Call("add", {"a": 2, "b": 3})], "The code is QUOKKA-4417."]
        await agent.run(user_msg=VAULT, memory=memory)

    asyncio.run(scenario())
    check_calls(script, memory)
    # the call after the tool result is rendered with the user's question as the query
    final_call = script.received[-1]
    assert "QUOKKA-4417" in memory_messages(final_call)[0].content
    assert final_call[-1].role == MessageRole.TOOL and final_call[-1].content == "5"
    log = memory.get_all()
    assert sum(m.role == MessageRole.TOOL for m in log) == 16  # every tool result is stored
    assert sum(m.role == MessageRole.USER for m in log) == 16
    assert_valid_structure(log)


def test_agent_workflow_with_flexamemory():
    script = ScriptedLLM()
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-workflow")
    agent = FunctionAgent(name="records", description="Reads records", tools=[read_record, add],
                          llm=script.llm(), system_prompt=SYSTEM)
    workflow = AgentWorkflow(agents=[agent], root_agent="records")
    asyncio.run(run_turns(workflow, script, memory, records=range(10, 26)))
    check_calls(script, memory)
    assert sum(m.role == MessageRole.TOOL for m in memory.get_all()) == 17


def test_agent_restored_from_a_saved_context_keeps_its_memory():
    script = ScriptedLLM()
    memory = FlexAMemory.from_defaults(budget=BUDGET, namespace="li-restore", kind="agent")
    agent = FunctionAgent(tools=[read_record, add], llm=script.llm(), system_prompt=SYSTEM)
    ctx = Context(agent)
    asyncio.run(run_turns(agent, script, memory, ctx=ctx))
    before = len(asyncio.run(ctx.store.get("memory")).get_all())  # the context holds its own copy
    assert before == 60

    saved = json.loads(json.dumps(ctx.to_dict(serializer=JsonSerializer())))
    restored = Context.from_dict(agent, saved, serializer=JsonSerializer())
    script.received.clear()
    script.plan += [[Call("add", {"a": 1, "b": 1})], "The code is QUOKKA-4417."]

    async def resume():
        await agent.run(user_msg=VAULT, ctx=restored)
        return await restored.store.get("memory")

    restored_memory = asyncio.run(resume())
    assert isinstance(restored_memory, FlexAMemory) and restored_memory is not memory
    assert restored_memory.engine is memory.engine  # reopened the same store and engine
    assert len(restored_memory.get_all()) == before + 4
    first_call = script.received[0]
    assert len(memory_messages(first_call)) == 1  # the restored agent remembers earlier runs
    assert_valid_structure(first_call)
