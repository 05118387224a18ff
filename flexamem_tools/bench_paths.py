"""The paths a render takes in a user's program, for ``flexamem bench --paths``.

A user never hands the core the same list of core ``Message`` objects again: an agent loop
passes its own message objects, one step more on every call, through an adapter's codec
(mini-swe-agent's dicts, LangChain's ``BaseMessage`` objects, LlamaIndex's ``ChatMessage``
objects) or as OpenAI-style dicts straight to :meth:`FlexAMem.render`. Each path here builds
the bench's history once as that host's objects and renders a growing prefix of them per
call, so the time of a render includes what the path costs: converting, matching the stored
chain, converting back. ``core`` is the core's own path (the same ``Message`` objects).

A framework that is not installed is skipped, with the reason in the rows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flexamem_core.memory import FlexAMem
from flexamem_core.model.messages import Message
from flexamem_core.request.wire import chat_message

#: Every path, in the order the rows list them.
PATHS = ("core", "dicts", "minisweagent", "langchain", "llamaindex")


@dataclass(frozen=True)
class HostPath:
    """How one host holds a history (``convert``, once) and renders it (``render``, per call)."""

    name: str
    convert: Callable[[Sequence[Message]], list[Any]]
    render: Callable[[FlexAMem, list[Any], str], Any]


def _core() -> HostPath:
    return HostPath("core", list, lambda mem, msgs, ns: mem.render(msgs, namespace=ns))


def _dicts() -> HostPath:
    return HostPath("dicts", lambda msgs: [chat_message(m) for m in msgs],
                    lambda mem, msgs, ns: mem.render(msgs, namespace=ns))


def _minisweagent() -> HostPath:
    from flexamem_minisweagent.convert import CODEC

    from flexamem_core.host import render_host

    return HostPath("minisweagent", lambda msgs: [chat_message(m) for m in msgs],
                    lambda mem, msgs, ns: render_host(mem, CODEC, msgs, namespace=ns))


def _langchain() -> HostPath:
    from flexamem_langgraph.convert import LangChainCodec, from_core_message

    from flexamem_core.host import render_host

    codec = LangChainCodec()
    return HostPath("langchain", lambda msgs: [from_core_message(m) for m in msgs],
                    lambda mem, msgs, ns: render_host(mem, codec, msgs, namespace=ns))


def _llamaindex() -> HostPath:
    from flexamem_llamaindex.convert import LlamaIndexCodec
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock

    from flexamem_core.host import render_host

    roles = {"system": MessageRole.SYSTEM, "user": MessageRole.USER, "assistant": MessageRole.ASSISTANT,
             "tool": MessageRole.TOOL}

    def one(m: Message) -> ChatMessage:
        if m.role == "tool":
            return ChatMessage(role=MessageRole.TOOL, content=m.text,
                               additional_kwargs={"tool_call_id": m.tool_call_id, "name": m.name})
        blocks: list[Any] = [TextBlock(text=m.text)]
        blocks += [ToolCallBlock(tool_call_id=c.id, tool_name=c.name, tool_kwargs=json.loads(c.arguments or "{}"))
                   for c in m.tool_calls]
        return ChatMessage(role=roles[m.role], blocks=blocks)

    codec = LlamaIndexCodec()
    return HostPath("llamaindex", lambda msgs: [one(m) for m in msgs],
                    lambda mem, msgs, ns: render_host(mem, codec, msgs, namespace=ns))


_BUILDERS: dict[str, Callable[[], HostPath]] = {"core": _core, "dicts": _dicts, "minisweagent": _minisweagent,
                                                 "langchain": _langchain, "llamaindex": _llamaindex}


def host_path(name: str) -> HostPath | str:
    """The path ``name``, or why it cannot run here (its framework is not installed)."""
    try:
        return _BUILDERS[name]()
    except ImportError as exc:
        return f"{name}: not installed ({exc.name})"


def time_path(path: HostPath, mem: FlexAMem, history: Sequence[Message], cut: int, renders: int,
              namespace: str) -> dict[str, float]:
    """Render the host's history growing by one step a call, ``renders`` times, after one
    untimed call that writes its units; the median and 95th percentile in ms, the query
    embedding included (the same for every path)."""
    host = path.convert(history[: cut + 2 * renders])
    path.render(mem, host[:cut], namespace)
    times = []
    for r in range(renders):
        msgs = host[: cut + 2 * (r + 1)]  # a new list of the same objects, as hosts pass them
        t0 = time.perf_counter()
        path.render(mem, msgs, namespace)
        times.append(1000 * (time.perf_counter() - t0))
    return {"render_ms_p50": float(np.percentile(times, 50)), "render_ms_p95": float(np.percentile(times, 95))}
