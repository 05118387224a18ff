"""The messages of one call: fixed prompt, one memory message, the recent window.

Each message rule of DESIGN.md section 8 has one small function here so it can be
tested on its own: the fixed prompt split, exactly one system message first, the recent
window (whole units, so tool calls keep their results), the newest unit degraded when
it alone exceeds the budget, and the exact token count of what is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from .messages import Message, message_text
from .protocols import Tokenizer

#: Tokens a chat format adds per message (role and separators), and once per request.
PER_MESSAGE = 4
PER_REQUEST = 3
MEMORY_ID = "flexamem-memory"
TRUNCATION_MARK = "\n[... {n} tokens of this output omitted by FlexA-Mem to fit the budget ...]\n"


class BudgetError(ValueError):
    """The budget cannot hold the fixed prompt (system prompt and task or question)."""


@dataclass
class Rendered:
    """What to send to the model, the memory text, its exact token count and the report."""

    messages: list[Message]
    memory_text: str | None
    tokens: int
    report: dict[str, Any] = field(default_factory=dict)
    passthrough: bool = False


def count_messages(messages: Sequence[Message], tokenizer: Tokenizer, extra_tokens: int = 0) -> int:
    """Tokens of a request: every message's text and tool calls, plus format overhead."""
    if not messages:
        return extra_tokens
    return PER_REQUEST + extra_tokens + sum(PER_MESSAGE + tokenizer.count(message_text(m))
                                            for m in messages)


def exceeds(messages: Sequence[Message], tokenizer: Tokenizer, limit: int, extra_tokens: int = 0) -> bool:
    """Whether a request is over ``limit`` tokens, counting newest first and stopping early
    (so a long history below the budget is not re-counted in full on every call)."""
    total = PER_REQUEST + extra_tokens
    for m in reversed(messages):
        total += PER_MESSAGE + tokenizer.count(message_text(m))
        if total > limit:
            return True
    return False


@dataclass(frozen=True)
class Layout:
    """A history split into the fixed prompt, the body that becomes units, and the current turn."""

    system: Message | None
    task: tuple[Message, ...]
    body: tuple[Message, ...]
    current: tuple[Message, ...]

    @property
    def fixed(self) -> list[Message]:
        """The fixed prompt that opens every rendered request: the system message and the task."""
        return [m for m in (self.system, *self.task) if m is not None]


def one_system(messages: Sequence[Message]) -> Message | None:
    """Leading system messages joined into one (a copy); None when there is none."""
    if not messages:
        return None
    if len(messages) == 1:
        return messages[0]
    first = messages[0]
    return replace(first, content="\n\n".join(m.text for m in messages))


def split_layout(messages: Sequence[Message], kind: str) -> Layout:
    """Agents: system + task (first user message) fixed, the rest is body.
    Readers: system fixed, the current turn (from the last user message on) kept, the rest body."""
    i = 0
    while i < len(messages) and messages[i].role == "system":
        i += 1
    system = one_system(messages[:i])
    if kind == "agent":
        if i < len(messages) and messages[i].role == "user":
            return Layout(system, (messages[i],), tuple(islice(messages, i + 1, None)), ())
        return Layout(system, (), tuple(islice(messages, i, None)), ())
    last_user = next((j for j in range(len(messages) - 1, i - 1, -1) if messages[j].role == "user"), None)
    if last_user is None:
        return Layout(system, (), tuple(islice(messages, i, None)), ())
    return Layout(system, (), tuple(islice(messages, i, last_user)), tuple(islice(messages, last_user, None)))


def no_inner_system(messages: Sequence[Message]) -> list[Message]:
    """System messages inside the history become user messages (copies) marked [system]."""
    return [replace(m, role="user", content=f"[system] {m.text}") if m.role == "system" else m
            for m in messages]


def recent_window(unit_tokens: Sequence[int], limit: float) -> int:
    """Number of newest units in the window: the longest run within ``limit``, at least one."""
    n, used = 0, 0
    for t in reversed(unit_tokens):
        if n and used + t > limit:
            break
        used += t
        n += 1
    return n


def fit_messages(messages: Sequence[Message], room: int, tokenizer: Tokenizer) -> tuple[list[Message], int]:
    """Shrink the largest message texts (middle cut, marked) until they fit ``room`` tokens.

    Used only when the newest unit alone exceeds the budget: tool outputs and
    observations go first, assistant text last; tool calls, ids and pairing are kept.
    Returns the copies and how many cuts were made (the caller checks the final fit).
    """
    msgs = list(messages)
    cut = 0
    cuttable = set(range(len(msgs)))
    while cuttable:
        over = count_messages(msgs, tokenizer) - PER_REQUEST - room
        if over <= 0:
            break
        j = max(cuttable, key=lambda k: (msgs[k].role != "assistant", tokenizer.count(msgs[k].text), -k))
        text = msgs[j].text
        n = tokenizer.count(text)
        keep = max(0, n - over - 32)
        new_text = _middle_cut(text, keep, n, tokenizer) if n > 48 else text
        if tokenizer.count(new_text) >= n:
            cuttable.discard(j)  # cannot get shorter
            continue
        msgs[j] = replace(msgs[j], content=new_text, metadata={**msgs[j].metadata, "flexamem_truncated": True})
        cut += 1
        if keep == 0:
            cuttable.discard(j)
    return msgs, cut


def _middle_cut(text: str, keep: int, total: int, tokenizer: Tokenizer) -> str:
    parts = tokenizer.split(text, max(1, keep // 2)) if keep >= 2 else []
    head = parts[0] if parts else ""
    tail = parts[-1] if len(parts) > 1 else ""
    omitted = total - tokenizer.count(head) - tokenizer.count(tail)
    return head + TRUNCATION_MARK.format(n=omitted) + tail


def memory_message(text: str) -> Message:
    """The one tagged memory message (deterministic id, so the prefix stays cacheable)."""
    return Message(role="user", content=text, id=MEMORY_ID, metadata={"flexamem": "memory"})


NO_RESULT = "[no result was recorded for this tool call]"


def repair_pairing(messages: Sequence[Message]) -> tuple[list[Message], int]:
    """Make tool calls and results pair up in a rendered copy (the store keeps the original).

    Calls without an id get a deterministic one (and a following id-less result takes
    it); calls left without a result get a marked placeholder result; a result with no
    matching call becomes a user message marked as such. Returns the copies and how
    many repairs were made.
    """
    out: list[Message] = []
    open_calls: list[str] = []
    deferred: list[Message] = []  # orphan results met while calls are open: shown after them
    fixes = 0

    def close_open() -> None:
        nonlocal fixes
        for call_id in open_calls:
            out.append(Message(role="tool", content=NO_RESULT, tool_call_id=call_id,
                               metadata={"flexamem": "placeholder"}))
            fixes += 1
        open_calls.clear()
        out.extend(deferred)
        deferred.clear()

    for idx, m in enumerate(messages):
        if m.role == "tool":
            if m.tool_call_id is not None and m.tool_call_id in open_calls:
                open_calls.remove(m.tool_call_id)
                out.append(m)
            elif m.tool_call_id is None and open_calls:
                out.append(replace(m, tool_call_id=open_calls.pop(0)))
                fixes += 1
            else:
                (deferred if open_calls else out).append(
                    Message(role="user", content=f"[tool result without a matching call] {m.text}",
                            id=m.id, metadata={"flexamem": "orphan-result"}))
                fixes += 1
            continue
        close_open()
        if m.role == "assistant" and m.tool_calls:
            calls = []
            for k, c in enumerate(m.tool_calls):
                if c.id is None or c.id in open_calls:
                    c = replace(c, id=f"flexamem_call_{idx}_{k}")
                    fixes += 1
                calls.append(c)
                open_calls.append(c.id or "")
            m = replace(m, tool_calls=tuple(calls)) if tuple(calls) != m.tool_calls else m
        out.append(m)
    close_open()
    return out, fixes
