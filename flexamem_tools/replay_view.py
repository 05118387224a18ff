"""One model call as the HTML replay shows it, from a ``Rendered`` or a ``flexamem replay`` step.

The page needs the same few facts whatever produced the call: how the budget was split
(system prompt and task, memory, recent window, unused), each old unit's resolution, the
prefix a provider's cache would reuse, and the messages exactly as sent. Both sources keep
them in the render report (``Rendered.report``); this module reads them out once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flexamem_core.model.messages import Message, message_text
from flexamem_core.recall.report import all_unit_rows
from flexamem_core.request.marker import is_marked
from flexamem_core.request.rendered import Rendered

#: B̄ / B when a report does not say (a pass-through report carries only the budget).
DEFAULT_MARGIN = 0.95


@dataclass(frozen=True)
class SentMessage:
    """A message as sent: role, its text (content and tool calls), and whether it is the memory."""

    role: str
    text: str
    memory: bool = False
    cut: bool = False
    note: str = ""


@dataclass(frozen=True)
class StepView:
    """What the page draws for one model call."""

    number: int
    tokens: int
    budget: int
    effective_budget: int
    passthrough: bool
    cache_step: str
    reused_prefix: int
    split: dict[str, int]
    units: list[dict[str, Any]]
    window_units: int
    messages: list[SentMessage]
    facts: dict[str, Any] = field(default_factory=dict)


def budget_split(report: Mapping[str, Any], tokens: int, budget: int, passthrough: bool) -> dict[str, int]:
    """Tokens of each part of the request; the window is what the fixed prompt and memory leave."""
    if passthrough:
        return {"history": tokens, "unused": max(0, budget - tokens)}
    prompt = int(report.get("prompt_tokens") or 0)
    memory = int(report.get("memory_tokens") or 0)
    return {"system + task": prompt, "memory": memory, "window": max(0, tokens - prompt - memory),
            "unused": max(0, budget - tokens)}


def _core_message(m: Message) -> SentMessage:
    return SentMessage(m.role, message_text(m), is_marked(m.metadata),
                       bool(m.metadata.get("flexamem_truncated")),
                       f"tool result of {m.tool_call_id}" if m.tool_call_id else "")


def _host_message(sent: Mapping[str, Any], core: Mapping[str, Any] | None) -> SentMessage:
    """A host-format message (what the API received), flagged from its core counterpart."""
    content = sent.get("content")
    parts = [content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, indent=1)
             if content is not None else ""]
    for key in ("tool_calls", "output", "input"):
        if sent.get(key):
            parts.append(f"{key}: " + json.dumps(sent[key], ensure_ascii=False, indent=1, default=str))
    meta = (core or {}).get("metadata") or {}
    text = "\n".join(p for p in parts if p)
    memory = is_marked(meta) or is_marked(sent.get("extra")) or text.startswith("<memory>")
    note = f"tool result of {sent['tool_call_id']}" if sent.get("tool_call_id") else ""
    return SentMessage(str(sent.get("role") or sent.get("type") or "?"), text, memory,
                       bool(meta.get("flexamem_truncated")), note)


def _view(number: int, report: Mapping[str, Any], tokens: int, passthrough: bool,
          messages: list[SentMessage], facts: dict[str, Any]) -> StepView:
    budget = int(report.get("budget") or tokens or 1)
    cache = report.get("cache") or {}
    return StepView(
        number=number, tokens=tokens, budget=budget,
        effective_budget=int(report.get("effective_budget") or budget * DEFAULT_MARGIN),
        passthrough=passthrough, cache_step="passthrough" if passthrough else str(cache.get("step", "render")),
        reused_prefix=int(cache.get("reused_prefix_tokens") or 0),
        split=budget_split(report, tokens, budget, passthrough),
        units=[] if passthrough else all_unit_rows(report),
        window_units=0 if passthrough else int(report.get("window_units") or 0),
        messages=messages, facts=facts)


def from_rendered(rendered: Rendered, number: int) -> StepView:
    """A step of any ``Rendered`` sequence (a LangGraph thread, a LlamaIndex memory, ...)."""
    return _view(number, rendered.report, rendered.tokens, rendered.passthrough,
                 [_core_message(m) for m in rendered.messages], {})


def from_replay_step(step: Mapping[str, Any]) -> StepView:
    """A step of :func:`flexamem_minisweagent.replay.replay`: the host messages as sent."""
    core: Sequence[Mapping[str, Any]] = step.get("rendered") or ()
    sent: Sequence[Mapping[str, Any]] = step.get("sent") or core
    pairs = zip(sent, core) if len(core) == len(sent) else ((m, None) for m in sent)
    facts = {k: step[k] for k in ("message_index", "history_messages", "history_tokens", "cached_tokens", "cost")
             if k in step}
    return _view(int(step["step"]), step.get("report") or {}, int(step["tokens"]), bool(step["passthrough"]),
                 [_host_message(m, c) for m, c in pairs], facts)


def as_views(steps: Sequence[Rendered | Mapping[str, Any]]) -> list[StepView]:
    """Views of ``Rendered`` results (numbered from 1) or replay step dicts (their own numbers)."""
    return [from_rendered(s, i) if isinstance(s, Rendered) else from_replay_step(s)
            for i, s in enumerate(steps, 1)]
