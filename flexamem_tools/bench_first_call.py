"""What the first call over an existing history costs, for ``flexamem bench --first-call``.

A thread loaded from a checkpoint, a chat store or a resumed run reaches the memory with its
whole history on the first call, and every unit must be written (its record, and its vectors
before anything ranks by them: a cache-stable agent step leaves them to the embedder's
background thread, :mod:`flexamem_core.render.note_fill`) before the request can be rendered.
Here each adapter gets such a history once, as its host holds it:

- ``minisweagent``: ``FlexAMemModel.render`` on mini-swe-agent's message dicts;
- ``langchain``: the render the ``create_agent`` middleware makes, on LangChain messages;
- ``llamaindex``: ``FlexAMemory.get`` over a chat store, with the preset for the history: its
  ``"agent"`` preset (tool loops) on an agent's history, its default ``"chat"`` preset on a
  conversation.

Every path gets the same history: saved mini-swe-agent runs joined into one history of N
messages (the first run's system message and task, then the steps of as many runs as it
takes); LlamaIndex gets it as the ``ChatMessage`` objects an agent's chat store would hold,
and with ``conversations`` also a conversation, the history its chat preset is for: a LoCoMo
file's conversations joined (short turns; as many messages as they have at most), or a
LongMemEval file's haystacks joined (chat sessions with long assistant answers).
Each call has a fresh memory and the real model, loaded beforehand, with its vector cache
emptied. The next call comes at once (no model call between), and the row says how long the
background thread then still embedded.
The ``flexamem`` logger's INFO lines during the call are kept: what a host's log shows while
it waits (the catch-up's announcement, its progress with an estimate, its end).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from flexamem_core.memory import FlexAMem
from flexamem_core.model.messages import Message

#: The adapters timed, in the order the rows list them.
FIRST_CALL_PATHS = ("minisweagent", "langchain", "llamaindex")


def trajectory_history(runs: Sequence[Mapping[str, Any]], size: int) -> list[dict[str, Any]]:
    """One agent history of about ``size`` messages (ending on an observation, as a model call
    sees it): the first run's system message and task, then the steps of the runs in order."""
    messages = [dict(m) for m in runs[0]["messages"][:2]]
    for run in runs:
        messages += [dict(m) for m in run["messages"][2:] if m["role"] in ("assistant", "user")]
        if len(messages) >= size:
            break
    return _ending_on_user(messages[:size])


def conversation_history(histories: Sequence[Sequence[Message]], size: int) -> list[dict[str, Any]]:
    """One conversation of at most ``size`` messages from several joined, ending on a user turn."""
    return _ending_on_user([m.to_dict() for h in histories for m in h if m.role in ("user", "assistant")][:size])


def conversation_histories(path: str) -> list[Sequence[Message]]:
    """The conversations of a LoCoMo file, or the haystacks of a LongMemEval file (told apart by
    their records' keys)."""
    from flexamem_eval.datasets import load, read_records

    first = read_records(path)[:1]
    dataset = "locomo" if first and "conversation" in first[0] else "longmemeval"
    return [item.history for item in load(dataset, path)]


def _ending_on_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` up to their last user message: a model call comes after an observation or a turn."""
    while messages and messages[-1]["role"] != "user":
        messages.pop()
    return messages


class _Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _time_call(call: Callable[[], Any]) -> tuple[float, list[str]]:
    """Seconds ``call`` took, and the ``flexamem`` logger's INFO lines meanwhile."""
    log = logging.getLogger("flexamem")
    handler, level = _Captured(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0, handler.lines
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


#: What the host adds before the call after the first: the model's reply and the next input.
NEXT_REPLY = "I will look at the history first."
NEXT_INPUT = "Go on with the task, please."

Calls = tuple[Callable[[], Any], Callable[[], Any]]


def _minisweagent_call(history: list[dict[str, Any]], budget: int, embedder: Any) -> Calls:
    from flexamem_minisweagent import FlexAMemModel
    from flexamem_minisweagent.settings import FlexAMemSettings
    from minisweagent.models.test_models import DeterministicModel

    mem = FlexAMem(FlexAMemSettings().core_config(budget), embedder=embedder)
    model = FlexAMemModel(inner=DeterministicModel(outputs=[]), memory=mem,
                          flexamem={"budget": budget, "tool_schema_tokens": 0})
    after = [*history, {"role": "assistant", "content": NEXT_REPLY}, {"role": "user", "content": NEXT_INPUT}]
    return lambda: model.render(history), lambda: model.render(after)


def _langchain_call(history: list[dict[str, Any]], budget: int, embedder: Any) -> Calls:
    from flexamem_langgraph.convert import from_core_message
    from flexamem_langgraph.render import render_langchain
    from langchain_core.messages import AIMessage, HumanMessage

    from flexamem_core.host import config_for_budget

    mem = FlexAMem(config_for_budget(budget), embedder=embedder)
    converted = [from_core_message(Message.from_dict(m)) for m in history]  # the graph state's own objects
    after = [*converted, AIMessage(NEXT_REPLY), HumanMessage(NEXT_INPUT)]
    return (lambda: render_langchain(mem, converted, namespace="resumed", budget=budget),
            lambda: render_langchain(mem, after, namespace="resumed", budget=budget))


def _llamaindex_call(history: list[dict[str, Any]], budget: int, embedder: Any, kind: str = "chat") -> Calls:
    from flexamem_llamaindex import FlexAMemory
    from llama_index.core.base.llms.types import ChatMessage, MessageRole

    chat = [ChatMessage(role=MessageRole(m["role"]), content=str(m.get("content") or "")) for m in history]
    memory = FlexAMemory.from_defaults(chat_history=chat[:-1], budget=budget, embedder=embedder, kind=kind)

    def next_call() -> Any:
        memory.put_messages([chat[-1], ChatMessage(role=MessageRole.ASSISTANT, content=NEXT_REPLY)])
        return memory.get(input=NEXT_INPUT)
    return lambda: memory.get(input=chat[-1].content), next_call


def first_call_rows(trajectories: str, sizes: Sequence[int], budget: int, paths: Sequence[str],
                    print_fn: Callable[[str], None] = print, conversations: str | None = None
                    ) -> list[dict[str, Any]]:
    """Rows of ``flexamem bench --first-call``: per path and history size, the first call's
    seconds, units written and the INFO lines logged (the last one shown)."""
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
    from flexamem_core.index.embeddings import default_embedder

    embedder = default_embedder()
    embedder.load()
    from flexamem_minisweagent.trajectory import load_trajectories

    runs = load_trajectories(trajectories)
    calls = {"minisweagent": _minisweagent_call, "langchain": _langchain_call,
             "llamaindex": lambda *args: _llamaindex_call(*args, kind="agent"),
             "llamaindex-chat": _llamaindex_call}
    cases = [(path, "agent", trajectory_history(runs, size)) for path in paths for size in sizes]
    if conversations is not None and "llamaindex" in paths:
        chats = conversation_histories(conversations)
        cases += [("llamaindex", "conversation", conversation_history(chats, size)) for size in sizes]
    rows: list[dict[str, Any]] = []
    for path, kind, history in cases:
        embedder._cache.clear()  # every vector of the history is made by this call
        call, next_call = calls[path if kind == "agent" else f"{path}-chat"](history, budget, embedder)
        calls_before = embedder.calls
        seconds, lines = _time_call(call)
        embedded = embedder.calls - calls_before
        next_seconds, _ = _time_call(next_call)
        by_next = embedder.calls - calls_before - embedded
        t0 = time.perf_counter()
        embedder.wait()  # what the background thread still had to embed after the next call
        background = time.perf_counter() - t0
        row = {"path": path, "history": kind, "messages": len(history), "budget": budget, "seconds": seconds,
               "texts_embedded": embedded, "next_seconds": next_seconds, "texts_embedded_by_next": by_next,
               "background_after_next_seconds": background,
               "texts_embedded_in_all": embedder.calls - calls_before, "info_lines": len(lines),
               "last_info_line": lines[-1] if lines else "", "load": os.getloadavg()[0]}
        rows.append(row)
        print_fn(f"{path:<13} {kind:<12} {row['messages']:>6} messages  first call {seconds:7.2f} s  "
                 f"texts embedded {embedded:>6}  next call at once {next_seconds:6.2f} s  "
                 f"then background {background:6.2f} s  texts in all {row['texts_embedded_in_all']:>6}  "
                 f"INFO lines {len(lines):>3}  {row['last_info_line']}")
    return rows
