"""A long ``create_agent`` run at a small budget: the memory keeps its room (issue 9, defect 2).

160 tool steps at budget 4,000, every 16th returning a log of about 2,200 tokens, driven by
langchain-core's fake chat model through FlexAMemMiddleware. With the newest step that big,
the cache-stable re-render used to keep only a few tokens for the memory (every old record
hidden) and sent that for several calls.
"""

from __future__ import annotations

from typing import Any

from flexamem_langgraph import FlexAMemMiddleware, LangChainRender
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from flexamem_core import FlexAMem, FlexAMemConfig

STEPS, PERIOD, BUDGET = 160, 16, 4000


class ToolModel(FakeMessagesListChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolModel:
        return self


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return "\n".join(f"{path}:{i:02d}: setting_{i} = {(i * 7919 + len(path) * 31) % 100003}  # tuned value"
                     for i in range(20))


@tool
def dump_log(name: str) -> str:
    """Dump a service log."""
    return "\n".join(f"{name} line {i}: request id=req-{i * 37 % 1000} status=ok latency={i * 3}ms"
                     for i in range(100))


def _replies() -> list[AIMessage]:
    out = []
    for i in range(STEPS):
        name, args = ("dump_log", {"name": f"svc{i}"}) if i % PERIOD == PERIOD - 1 else \
            ("read_file", {"path": f"src/mod_{i}.py"})
        out.append(AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{i}",
                                                      "type": "tool_call"}]))
    return [*out, AIMessage(content="done")]


def test_a_big_newest_step_leaves_the_memory_half_its_allowance_or_all_it_needs(hashing_embedder) -> None:
    mem = FlexAMem(FlexAMemConfig(budget=BUDGET), embedder=hashing_embedder)
    renders: list[LangChainRender] = []
    agent = create_agent(ToolModel(responses=_replies()), [read_file, dump_log],
                         system_prompt="You are an investigator.",
                         middleware=[FlexAMemMiddleware(mem, on_render=renders.append)])
    agent.invoke({"messages": [HumanMessage("Investigate the service config and logs.")]},
                 {"recursion_limit": 1000})
    rendered = [o.rendered for o in renders if not o.rendered.passthrough]
    assert len(rendered) > 100
    with_old = [r.report for r in rendered if r.report["old_units"]]
    # a memory under half its allowance is one that needed no more: it hides no old unit
    small = [(rep["memory_tokens"], rep["allowance"], rep["resolutions"]) for rep in with_old
             if rep["memory_tokens"] < rep["allowance"] / 2 and rep["resolutions"].get("hidden")]
    assert not small, small
    for r in rendered:
        assert r.tokens <= mem.config.effective_budget
    for rep in with_old:  # the report shows the part of the allowance left unused
        assert rep["unused_allowance"] == max(0, rep["allowance"] - rep["memory_tokens"])
    big = sum(r.messages[-1].text.count("status=ok") >= 90 for r in rendered)
    assert big >= 8  # the big steps were rendered, not passed through
