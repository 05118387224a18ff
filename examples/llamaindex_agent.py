"""A LlamaIndex FunctionAgent whose memory is FlexA-Mem (runs offline as is).

    python examples/llamaindex_agent.py

It runs a long tool loop inside one ``agent.run()`` and a few follow-up turns under a
2,000-token budget, then prints what the model received on its last call: the system
prompt, the task, one <memory> message (timeline + recovered detail) and the newest steps.

To use a real model, change the one line marked ``LLM``, e.g.
    from llama_index.llms.openai import OpenAI; llm = OpenAI(model="gpt-4o-mini")
"""

from __future__ import annotations

import asyncio
import random

from flexamem_llamaindex import agent_memory
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.llms import MockFunctionCallingLLM


def read_log(day: int) -> str:
    """Read the service log of one day of March 2024."""
    rng = random.Random(day)
    lines = [f"2024-03-{day:02d} {h:02d}:00 {rng.choice(['ok', 'ok', 'slow', 'retry'])} "
             f"latency={rng.randint(20, 900)}ms host=web-{rng.randint(1, 4)}" for h in range(0, 24, 2)]
    if day == 3:
        lines.append("2024-03-03 13:37 ERROR disk full on db-2 (volume /var/lib/pg, 100%)")
    return "\n".join(lines)


def scripted_model() -> MockFunctionCallingLLM:
    """LlamaIndex's offline mock: reads days 1-20, then answers; stands in for a real model."""
    state = {"day": 0, "call": 0}

    def respond(messages: list[ChatMessage], **kwargs: object) -> ChatMessage:
        state["call"] += 1
        if (kwargs.get("tools") and state["day"] < 20 and messages[-1].role.value != "user") or state["call"] == 1:
            state["day"] += 1
            return ChatMessage(role="assistant", blocks=[ToolCallBlock(
                tool_call_id=f"call-{state['call']}", tool_name="read_log", tool_kwargs={"day": state["day"]})])
        memory = next((m.content for m in messages if (m.content or "").startswith("<memory>")), "")
        found = "disk full on db-2" in memory or any("disk full" in (m.content or "") for m in messages)
        return ChatMessage(role="assistant", content="The outage was the disk full on db-2 on March 3."
                           if found else "I could not find the cause.")

    return MockFunctionCallingLLM(response_generator=respond)


async def main() -> None:
    llm = scripted_model()  # LLM: replace with a real FunctionCallingLLM, e.g. OpenAI(model="gpt-4o-mini")
    memory, bounded = agent_memory(llm, budget=2000, namespace="ops-review")  # memory + FlexAMemLLM on it
    agent = FunctionAgent(tools=[read_log], llm=bounded,
                          system_prompt="You are an SRE. Read the logs, then find the outage cause.")
    answer = await agent.run(user_msg="Read the logs of March 1-20 and tell me what caused the outage.",
                             memory=memory, max_iterations=40)
    print("answer:", answer)
    wrapped = agent.llm
    print(f"\n{len(memory.get_all())} messages stored; last call: {wrapped.last_render.tokens} tokens "
          f"(budget 2000), passthrough={wrapped.last_render.passthrough}")
    report = wrapped.last_render.report
    print("old units by resolution:", report.get("resolutions"))
    print("units this call did something with:",
          [(u["label"], u["resolution"], u.get("why")) for u in report.get("units", [])][:5])


if __name__ == "__main__":
    asyncio.run(main())
