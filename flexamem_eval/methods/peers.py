"""Real peers run through their own code: LangChain ``trim_messages``, LlamaIndex ``ChatMemoryBuffer``.

Both get the same limit (B_bar) and the same token counter as every other method. Messages
are converted to the framework's types and back, so the context is exactly what the
framework would send.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from flexamem_core import Message
from flexamem_core.request.counting import PER_REQUEST

from ..items import Question
from .base import Env, Method, question_messages, split_prefix


class LangChainTrim(Method):
    """``trim_messages(strategy="last", include_system=True, start_on="human")``."""

    name = "langchain-trim"

    @classmethod
    def warm(cls, env: Env) -> None:
        from langchain_core.messages import HumanMessage, trim_messages

        # Its first call imports langchain's runnables and tracers (seconds): not in a render's time.
        trim_messages([HumanMessage(content="warm up")], max_tokens=10, token_counter=len, strategy="last")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # LangChain messages made once per message (kept alive, so their ids stay unique).
        self._lc: dict[int, tuple[Message, Any]] = {}
        self._back: dict[int, Message] = {}

    def _lc_message(self, m: Message) -> Any:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

        hit = self._lc.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        if m.role == "system":
            obj: Any = SystemMessage(content=m.text)
        elif m.role == "user":
            obj = HumanMessage(content=m.text)
        elif m.role == "assistant":
            obj = AIMessage(content=m.text, tool_calls=[
                {"name": c.name, "args": {"arguments": c.arguments}, "id": c.id or f"call{j}"}
                for j, c in enumerate(m.tool_calls)])
        else:
            obj = ToolMessage(content=m.text, tool_call_id=m.tool_call_id or "unknown")
        self._lc[id(m)] = (m, obj)
        self._back[id(obj)] = m
        return obj

    def _trim(self, messages: Sequence[Message], max_tokens: int) -> list[Message]:
        from langchain_core.messages import trim_messages

        lc = [self._lc_message(m) for m in messages]
        back = self._back

        def counter(msgs: list[Any]) -> int:
            return self.env.count([back.get(id(x)) or Message(role="user", content=str(x.content)) for x in msgs])

        trimmed = trim_messages(lc, max_tokens=max_tokens, token_counter=counter,
                                strategy="last", include_system=True, start_on="human")
        return [back.get(id(x)) or Message(role="user", content=str(x.content)) for x in trimmed]

    def question_context(self, question: Question, budget: int) -> list[Message]:
        return self._trim([*self.history, *question_messages(question)], self.env.effective(budget))

    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        if self.env.count(history) <= self.env.effective(budget):
            return list(history)
        return self._trim(history, self.env.effective(budget))


class LangChainTrimTask(LangChainTrim):
    """The same ``trim_messages`` call over the steps after the task, within what the system
    message and the task leave, both sent first: how an agent that must keep its task uses
    trim (``trim_messages`` itself keeps only a system message, so ``langchain-trim`` drops
    the task on every call past the budget). Agents only: a conversation has no task."""

    name = "langchain-trim-task"
    datasets = ("trajectories",)

    def step_context(self, history: Sequence[Message], budget: int) -> list[Message]:
        if self.env.count(history) <= self.env.effective(budget):
            return list(history)
        prefix, rest = split_prefix(history)
        # Both counts include the per-request constant once; the request has it once.
        room = self.env.effective(budget) - self.env.count(prefix) + PER_REQUEST
        return [*prefix, *self._trim(rest, room)] if room > PER_REQUEST else prefix


class LlamaIndexBuffer(Method):
    """``ChatMemoryBuffer`` with ``token_limit`` = B_bar and our tokenizer as ``tokenizer_fn``.

    The fixed prompt (system, task) or the question is passed as ``initial_token_count``,
    as an agent built on the buffer does with its system prompt and new input.

    ``ChatMemoryBuffer.get`` drops the oldest message (and the assistant and tool messages
    that would then start the history) and counts the joined contents again, once per
    dropped message: quadratic in the history. The buffer is therefore given only the
    messages from the last count its scan makes before the one that fits, found by
    bisection over the same counts (:func:`buffer_start`), so it makes the same last two
    decisions on the same strings and returns the same messages (``full=True`` runs it on
    the whole history; a test checks both agree on the dev data).
    """

    name = "llamaindex-buffer"
    full = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._chat: dict[int, tuple[Message, Any]] = {}

    @classmethod
    def warm(cls, env: Env) -> None:
        import llama_index.core.memory  # noqa: F401

    def _chat_message(self, m: Message) -> Any:
        from llama_index.core.base.llms.types import ChatMessage, MessageRole

        hit = self._chat.get(id(m))
        if hit is None or hit[0] is not m:
            roles = {"system": MessageRole.SYSTEM, "user": MessageRole.USER,
                     "assistant": MessageRole.ASSISTANT, "tool": MessageRole.TOOL}
            hit = self._chat[id(m)] = (m, ChatMessage(role=roles[m.role], content=m.text))
        return hit[1]

    def _buffer(self, messages: Sequence[Message], fixed: Sequence[Message], budget: int) -> list[Message]:
        from llama_index.core.memory import ChatMemoryBuffer

        chat = [self._chat_message(m) for m in messages]
        limit = self.env.effective(budget)
        initial = min(self.env.count(fixed), limit)
        tokenizer = self.env.tokenizer
        if not self.full:
            chat = chat[buffer_start(chat, limit - initial, tokenizer.count):]
        back = {id(c): m for c, m in zip(chat, messages[len(messages) - len(chat):], strict=True)}
        buffer = ChatMemoryBuffer.from_defaults(chat_history=list(chat), token_limit=limit,
                                                tokenizer_fn=lambda text: [0] * tokenizer.count(text))
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


#: Roles ``ChatMemoryBuffer.get`` never lets start the kept history.
_NO_START = ("assistant", "tool")


def buffer_start(chat: Sequence[Any], room: int, count: Callable[[str], int]) -> int:
    """Where ``ChatMemoryBuffer.get`` may start reading ``chat`` and still return the same messages.

    Its scan tries message counts ``m`` from ``len(chat)`` down (skipping counts whose first
    message is an assistant or tool message, never below 1) until the joined contents of the
    last ``m`` messages count at most ``room`` tokens. Those counts only grow with ``m``, so
    the first that fits is found by bisection; only contents near the room are joined
    (a count far over it is seen from the sum of the messages' own counts, then checked).
    Returns the start of the last count tried before the fitting one (0: the whole chat).
    """
    n = len(chat)
    if n <= 2:
        return 0
    roles = [str(getattr(c.role, "value", c.role)) for c in chat]
    contents = [str(c.content) for c in chat]
    seq = [n]  # the counts the scan tries, in its order
    m = n
    while m > 1:
        m -= 1
        while m > 1 and roles[n - m] in _NO_START:
            m -= 1
        seq.append(m)
    own = [count(t) for t in contents]
    suffix = [0] * (n + 1)  # suffix[m]: own counts of the last m messages
    for i in range(1, n + 1):
        suffix[i] = suffix[i - 1] + own[n - i]

    def fits(i: int) -> bool:
        mm = seq[i]
        return count(" ".join(contents[n - mm:])) <= room

    lo = 0  # seq[lo - 1] is over the room (checked exactly), or lo == 0
    far = 2 * room + 1_000
    while lo < len(seq) - 1 and suffix[seq[lo]] - seq[lo] > far:
        lo += 1
    if lo and fits(lo - 1):  # the estimate was wrong: scan everything
        lo = 0
    hi = len(seq)  # the first index that fits lies in [lo, hi]; hi: none fits
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return 0 if lo == 0 else n - seq[lo - 1]
