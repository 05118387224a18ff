"""LlamaIndex habits: the one-line agent setup bounds every call, an unwrapped loop is warned
about once, ``token_limit`` reads the budget, budgets come from the LLM, 0 is an error.

Real ``FunctionAgent`` runs driven by LlamaIndex's ``MockFunctionCallingLLM`` and real tools.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from flexamem_llamaindex import FlexAMemLLM, FlexAMemory, LlamaIndexCodec, agent_memory, to_core_list
from li_helpers import Call, ScriptedLLM, add, assert_valid_structure, read_record
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool

from flexamem_core import logs
from flexamem_core.host import FALLBACK_BUDGET, extra_tokens_of, window_budget

SYSTEM = "You are an auditor. Read every record you are asked for, then summarise."
TOOLS = [FunctionTool.from_defaults(read_record), FunctionTool.from_defaults(add)]
TASK = "Audit record 7 and records 20-59."


def loop_plan() -> list:
    """Forty-one tool calls in one run, then the answer: about 5,000 tokens of tool loop."""
    return [[Call("read_record", {"record_id": 7})],
            *[[Call("read_record", {"record_id": i})] for i in range(20, 60)],
            "Audit complete; vault code QUOKKA-4417."]


def run_agent(llm, memory: FlexAMemory) -> None:
    agent = FunctionAgent(tools=TOOLS, llm=llm, system_prompt=SYSTEM)

    async def run() -> None:  # the workflow needs a running loop
        await agent.run(user_msg=TASK, memory=memory, max_iterations=60)

    asyncio.run(run())


def schema_tokens(memory: FlexAMemory) -> int:
    return extra_tokens_of(memory.engine, LlamaIndexCodec(), TOOLS)  # the tools list as sent


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("flexamem") and r.levelno == logging.WARNING]


def test_agent_memory_bounds_every_call_with_a_budget_from_the_llm(caplog):
    caplog.set_level(logging.WARNING, logger="flexamem")
    script = ScriptedLLM(plan=loop_plan())
    inner = script.llm()
    memory, llm = agent_memory(inner, namespace="li-one-liner")
    budget = window_budget(inner.metadata.context_window)
    assert isinstance(llm, FlexAMemLLM) and memory.budget == memory.token_limit == budget
    run_agent(llm, memory)
    extra = schema_tokens(memory)
    assert len(script.received) == 42
    for received in script.received:
        assert_valid_structure(received)
        assert memory.engine.count_messages(to_core_list(received), extra) <= int(0.95 * budget)
    assert memory.engine.count_messages(to_core_list(memory.get_all())) > budget
    assert not warnings_of(caplog)


def test_an_unwrapped_function_agent_loop_over_the_budget_is_warned_about_once(caplog):
    logs._warned.discard("llamaindex-unwrapped-loop")
    caplog.set_level(logging.WARNING, logger="flexamem")
    for n in range(2):
        script = ScriptedLLM(plan=loop_plan())
        memory = FlexAMemory.from_defaults(budget=2000, namespace=f"li-unwrapped-{n}", kind="agent")
        run_agent(script.llm(), memory)
        largest = max(memory.engine.count_messages(to_core_list(r)) for r in script.received)
        assert largest > 2000  # what the warning is about: the loop really went over
    (warning,) = warnings_of(caplog)
    assert "budget 2000" in warning and "agent_memory" in warning


def test_token_limit_is_a_read_only_alias_and_zero_budgets_are_errors():
    memory = FlexAMemory.from_defaults(token_limit=1500, namespace="li-alias")
    assert memory.token_limit == memory.budget == 1500
    with pytest.raises((AttributeError, ValueError)):
        memory.token_limit = 10
    for kwargs in ({"budget": 0}, {"token_limit": 0}, {"budget": -1}, {"budget": 0, "token_limit": 0}):
        with pytest.raises(ValueError, match=r"budget|token_limit|positive"):
            FlexAMemory.from_defaults(**kwargs)
    with pytest.raises(ValueError, match="positive"):
        FlexAMemLLM(ScriptedLLM().llm(), memory, budget=0)


def test_the_default_budget_comes_from_the_llm_else_it_is_logged(caplog):
    logs._warned.discard("llamaindex-default-budget")
    caplog.set_level(logging.WARNING, logger="flexamem")
    llm = ScriptedLLM().llm(max_tokens=None)
    llm.metadata  # noqa: B018 - the mock's metadata is computed
    assert FlexAMemory.from_defaults(llm=llm, namespace="li-llm").budget == window_budget(llm.metadata.context_window)
    assert not warnings_of(caplog)
    assert FlexAMemory.from_defaults(namespace="li-none").budget == FALLBACK_BUDGET
    assert FlexAMemory.from_defaults(namespace="li-none-2").budget == FALLBACK_BUDGET
    (warning,) = warnings_of(caplog)
    assert "no budget" in warning
    assert FlexAMemory.from_defaults(budget=1234, llm=llm).budget == 1234  # explicit wins
