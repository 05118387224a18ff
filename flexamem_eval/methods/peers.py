"""Real peers run through their own code: LangChain ``trim_messages``, LlamaIndex ``ChatMemoryBuffer``.

Both get the same limit (B_bar) and the same token counter as every other method. Messages
are converted to the framework's types and back, so the context is exactly what the
framework would send.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flexamem_core import Message

from ..items import Question
from .base import Env, Method, question_messages, split_prefix


class LangChainTrim(Method):
    """``trim_messages(strategy="last", include_system=True, start_on="human")``."""

    name = "langchain-trim"

    @classmethod
    def warm(cls, env: Env) -> None:
        import langchain_core.messages  # noqa: F401

    def _trim(self, messages: Sequence[Message], budget: int) -> list[Message]:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages

        lc: list[Any] = []
        back: dict[int, Message] = {}
        for m in messages:
            if m.role == "system":
                obj: Any = SystemMessage(content=m.text)
            elif m.role == "user":
                obj = HumanMessage(content=m.text)
            elif m.role == "assistant":
                obj = AIMessage(content=m.text, tool_calls=[
                    {"name": c.name, "args": {"arguments": c.arguments}, "id": c.id or f"call{i}"}
                    for i, c in enumerate(m.tool_calls)])
            else:
                obj = ToolMessage(content=m.text, tool_call_id=m.tool_call_id or "unknown")
            back[id(obj)] = m
            lc.append(obj)
        lookup = {id(o): o for o in lc}

        def counter(msgs: list[Any]) -> int:
            return self.env.count([back[id(x)] if id(x) in lookup else Message(role="user", content=str(x.content))
                                   for x in msgs])

        trimmed = trim_messages(lc, max_tokens=self.env.effective(budget), token_counter=counter,
                                strategy="last", include_system=True, start_on="human")
        return [back.get(id(x)) or Message(role="user", content=str(x.content)) for x in trimmed]

    def question_context(self, question: Question, budget: int) -> list[Message]:
        return self._trim([*self.history, *question_messages(question)], budget)

    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        if self.env.count(history) <= self.env.effective(budget):
            return list(history)
        return self._trim(history, budget)


class LlamaIndexBuffer(Method):
    """``ChatMemoryBuffer`` with ``token_limit`` = B_bar and our tokenizer as ``tokenizer_fn``.

    The fixed prompt (system, task) or the question is passed as ``initial_token_count``,
    as an agent built on the buffer does with its system prompt and new input.
    """

    name = "llamaindex-buffer"

    @classmethod
    def warm(cls, env: Env) -> None:
        import llama_index.core.memory  # noqa: F401

    def _buffer(self, messages: Sequence[Message], fixed: Sequence[Message], budget: int) -> list[Message]:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole
        from llama_index.core.memory import ChatMemoryBuffer

        roles = {"system": MessageRole.SYSTEM, "user": MessageRole.USER,
                 "assistant": MessageRole.ASSISTANT, "tool": MessageRole.TOOL}
        chat = [ChatMessage(role=roles[m.role], content=m.text) for m in messages]
        back = {id(c): m for c, m in zip(chat, messages, strict=True)}
        tokenizer = self.env.tokenizer
        buffer = ChatMemoryBuffer.from_defaults(chat_history=chat, token_limit=self.env.effective(budget),
                                                tokenizer_fn=lambda text: [0] * tokenizer.count(text))
        initial = min(self.env.count(fixed), self.env.effective(budget))
        kept = buffer.get(initial_token_count=initial)
        return [back[id(c)] for c in kept if id(c) in back]

    def question_context(self, question: Question, budget: int) -> list[Message]:
        fixed = question_messages(question)
        return [*self._buffer(self.history, fixed, budget), *fixed]

    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        if self.env.count(history) <= self.env.effective(budget):
            return list(history)
        prefix, rest = split_prefix(history)
        return [*prefix, *self._buffer(rest, prefix, budget)]
