"""A LangChain ``create_agent`` agent with FlexA-Mem memory, runnable offline.

    python examples/langgraph_agent.py

It runs a scripted fake model (langchain-core's list fake, taught to accept ``bind_tools``)
through a tool loop whose outputs soon exceed a 3,000-token budget, and prints what every
model call received. To use a real model, change the one line marked REAL MODEL, e.g.
``MODEL = "openai:gpt-4.1-mini"`` (any ``init_chat_model`` string or chat model object).
"""

from __future__ import annotations

from typing import Any

from flexamem_langgraph import FlexAMemMiddleware, LangChainRender, is_memory_message, to_core
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from flexamem_core import FlexAMem, FlexAMemConfig


@tool
def read_file(path: str) -> str:
    """Read a file of the repository and return its full text."""
    lines = [f"{path}:{i:02d}: setting_{i} = {(i * 7919 + len(path)) % 10007}  # tuned for stage {i}"
             for i in range(1, 31)]
    return "\n".join([f"# {path}", *lines, f"{path}:31: DB_PORT = {5000 + len(path)}"])


class ScriptedModel(FakeMessagesListChatModel):
    """An offline stand-in for a tool-calling chat model: replies from a script."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        reply = super()._generate(messages, stop, run_manager, **kwargs).generations[0].message
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy(deep=True))])


def fake_model() -> ScriptedModel:
    paths = ["config/db.yaml", "src/client.py", "src/retry.py", "src/pool.py", "src/settings.py",
             "src/models.py", "src/views.py", "docs/deploy.md"]
    replies = [AIMessage(content="", tool_calls=[{"name": "read_file", "args": {"path": p}, "id": f"call_{i}"}])
               for i, p in enumerate(paths)]
    return ScriptedModel(responses=[*replies, AIMessage(content="DB_PORT is set in config/db.yaml.")])


MODEL: Any = fake_model()  # REAL MODEL: MODEL = "openai:gpt-4.1-mini"


RENDERS: list[LangChainRender] = []


def show(outcome: LangChainRender) -> None:
    """Called by the middleware after every render: print what the model is about to get."""
    RENDERS.append(outcome)
    r = outcome.rendered
    kind = "history fits, passed through" if r.passthrough else \
        f"memory {r.report['memory_tokens']} tokens, {r.report['window_units']} recent unit(s) verbatim"
    print(f"[{outcome.namespace}] model call: {len(outcome.messages)} messages, {r.tokens} tokens ({kind})")


def main() -> None:
    mem = FlexAMem(FlexAMemConfig(budget=3000))  # budget: the model's context in tokens
    agent = create_agent(MODEL, [read_file], system_prompt="You investigate repositories with tools.",
                         middleware=[FlexAMemMiddleware(mem, on_render=show)],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "demo-thread"}, "recursion_limit": 50}
    result = agent.invoke({"messages": [HumanMessage("Which port does the service use for its database?")]},
                          config)
    history = to_core(result["messages"]).messages
    print(f"\nstate['messages'] keeps the full history: {len(history)} messages, "
          f"{mem.count_messages(history)} tokens. Answer: {result['messages'][-1].text}")
    memory = next((m for m in RENDERS[-1].messages if is_memory_message(m)), None)
    if memory is not None:
        print("\nThe memory message of the last call (first 12 lines):")
        print("\n".join(memory.text.splitlines()[:12]))


if __name__ == "__main__":
    main()
