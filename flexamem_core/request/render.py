"""The messages of one call: fixed prompt, one memory message, the recent window.

The layout pieces of DESIGN.md section 8, each small enough to be tested on its own: the
fixed prompt split, the recent window (whole units, so tool calls keep their results),
the newest unit degraded when it alone exceeds the budget, and the exact token count of
what is sent. The message rules every request obeys (one system message first, pairing,
clean text) are the classes of :mod:`flexamem_core.request.properties`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from ..model.history import MessagesView
from ..model.messages import Message, clean_text
from ..model.protocols import Tokenizer
from .budget import BudgetError
from .marker import MEMORY_ID, mark
from .properties import one_system
from .wire import tool_calls_json

__all__ = ["MEMORY_ID", "PER_MESSAGE", "PER_REQUEST", "TRUNCATION_MARK", "BudgetError", "Layout", "Rendered",
           "count_messages", "exceeds", "fit_fixed", "fit_messages", "memory_message", "message_tokens",
           "middle_cut", "recent_window", "split_layout"]

#: Tokens a chat format adds per message (role and separators), and once per request.
PER_MESSAGE = 4
PER_REQUEST = 3
TRUNCATION_MARK = "\n[... {n} tokens of this output omitted by FlexA-Mem to fit the budget ...]\n"


@dataclass
class Rendered:
    """What to send to the model, the memory text, its exact token count and the report."""

    messages: list[Message]
    memory_text: str | None
    tokens: int
    report: dict[str, Any] = field(default_factory=dict)
    passthrough: bool = False


def message_tokens(message: Message, tokenizer: Tokenizer) -> int:
    """Tokens of one message as the request carries it: the format's ``PER_MESSAGE``, its text,
    its tool calls as the JSON sent (``function.arguments`` a JSON string inside it), and the
    ``tool_call_id`` and ``name`` fields (a name costs one more token, as OpenAI counts it)."""
    n = PER_MESSAGE + tokenizer.count(message.text)
    if message.tool_calls:
        n += tokenizer.count(tool_calls_json(message.tool_calls))
    if message.tool_call_id:
        n += tokenizer.count(clean_text(message.tool_call_id))
    if message.name:
        n += 1 + tokenizer.count(clean_text(message.name))
    return n


def count_messages(messages: Sequence[Message], tokenizer: Tokenizer, extra_tokens: int = 0) -> int:
    """Tokens of a request: every message as sent (:func:`message_tokens`), plus the request's own."""
    if not messages:
        return extra_tokens
    return PER_REQUEST + extra_tokens + sum(message_tokens(m, tokenizer) for m in messages)


def exceeds(messages: Sequence[Message], tokenizer: Tokenizer, limit: int, extra_tokens: int = 0) -> bool:
    """Whether a request is over ``limit`` tokens, counting newest first and stopping early
    (so a long history below the budget is not re-counted in full on every call)."""
    total = PER_REQUEST + extra_tokens
    for m in reversed(messages):
        total += message_tokens(m, tokenizer)
        if total > limit:
            return True
    return False


@dataclass(frozen=True)
class Layout:
    """A history split into the fixed prompt, the body that becomes units, and the current turn."""

    system: Message | None
    task: tuple[Message, ...]
    #: A tuple, or (``split_layout(shared=True)``) a view of the history list it came from.
    body: Sequence[Message]
    current: tuple[Message, ...]

    @property
    def fixed(self) -> list[Message]:
        """The fixed prompt that opens every rendered request: the system message and the task."""
        return [m for m in (self.system, *self.task) if m is not None]


def split_layout(messages: Sequence[Message], kind: str, shared: bool = False) -> Layout:
    """Agents: system + task (first user message) fixed, the rest is body.
    Readers: system fixed, the current turn (from the last user message on) kept, the rest body.

    ``shared`` (agents, ``messages`` a list): the body is a view of ``messages``, not a copy
    (for the namespace's own copy of the history, :mod:`flexamem_core.model.history`)."""
    i = 0
    while i < len(messages) and messages[i].role == "system":
        i += 1
    system = one_system(messages[:i])
    if kind == "agent":
        task = (messages[i],) if i < len(messages) and messages[i].role == "user" else ()
        start = i + len(task)
        body: Sequence[Message] = MessagesView(messages, start) if shared and isinstance(messages, list) else \
            tuple(islice(messages, start, None))
        return Layout(system, task, body, ())
    last_user = next((j for j in range(len(messages) - 1, i - 1, -1) if messages[j].role == "user"), None)
    if last_user is None:
        return Layout(system, (), tuple(islice(messages, i, None)), ())
    return Layout(system, (), tuple(islice(messages, i, last_user)), tuple(islice(messages, last_user, None)))


def recent_window(unit_tokens: Sequence[int], limit: float) -> int:
    """Number of newest units in the window: the longest run within ``limit``, at least one."""
    n, used = 0, 0
    for t in reversed(unit_tokens):
        if n and used + t > limit:
            break
        used += t
        n += 1
    return n


def fit_messages(messages: Sequence[Message], room: int, tokenizer: Tokenizer,
                 outputs_first: bool = True) -> tuple[list[Message], int]:
    """Shrink the largest message texts (middle cut, marked) until they fit ``room`` tokens.

    Used only when the newest unit alone exceeds the budget: tool outputs and
    observations go first, assistant text last (``outputs_first=False``, a chat: the
    largest turn first, so a long reply is cut before the short question it answers);
    tool calls, ids and pairing are kept.
    Each cut keeps as much of the text as the room allows (head and tail, within a few
    tokens), not a fixed share. Returns the copies and how many cuts were made (the
    caller checks the final fit).
    """
    msgs = list(messages)
    cut = 0
    cuttable = set(range(len(msgs)))
    while cuttable:
        over = count_messages(msgs, tokenizer) - PER_REQUEST - room
        if over <= 0:
            break
        j = max(cuttable, key=lambda k: (outputs_first and msgs[k].role != "assistant",
                                         tokenizer.count(msgs[k].text), -k))
        text = msgs[j].text
        n = tokenizer.count(text)
        target = n - over  # what this text may take for the whole to fit
        new_text = text
        if n > MIN_CUT_TOKENS:
            keep = max(0, target - tokenizer.count(TRUNCATION_MARK.format(n=n)))
            new_text = middle_cut(text, keep, tokenizer)
            for _ in range(3):  # token merges at the two joins can add a token or two
                excess = tokenizer.count(new_text) - target
                if excess <= 0 or keep == 0:
                    break
                keep = max(0, keep - excess)
                new_text = middle_cut(text, keep, tokenizer)
        if tokenizer.count(new_text) >= n:
            cuttable.discard(j)  # cannot get shorter
            continue
        msgs[j] = replace(msgs[j], content=new_text, metadata={**msgs[j].metadata, "flexamem_truncated": True})
        cut += 1
        cuttable.discard(j)  # cut once, as far as needed (a second cut would nest the marks)
    return msgs, cut


def fit_fixed(layout: Layout, limit: int, tokenizer: Tokenizer, extra_tokens: int = 0) -> tuple[Layout, int]:
    """The layout with its task (agents) or current turn (readers) cut to fit ``limit``.

    The same rule as for any message larger than its room: the largest messages of that
    part are cut in the middle with the visible mark, keeping head and tail, until the
    fixed prompt (system message, that part, ``extra_tokens``) takes at most ``limit``
    tokens. The system message is never cut; tool calls and ids are kept. Returns the
    layout (the same object when it already fits) and how many messages were cut; the
    caller checks that the cut part fits the budget (the marks take room too).
    """
    part = layout.task or layout.current
    fixed = [*layout.fixed, *layout.current]
    if not part or count_messages(fixed, tokenizer, extra_tokens) <= limit:
        return layout, 0
    prompt = count_messages([layout.system], tokenizer, extra_tokens) if layout.system else PER_REQUEST + extra_tokens
    cut, n = fit_messages(part, limit - prompt, tokenizer, outputs_first=False)
    if not n:
        return layout, 0
    return (replace(layout, task=tuple(cut)) if layout.task else replace(layout, current=tuple(cut))), n


#: Texts this short are not cut (the mark alone is about 20 tokens).
MIN_CUT_TOKENS = 48


def middle_cut(text: str, keep: int, tokenizer: Tokenizer) -> str:
    """``text`` with its middle replaced by the mark: a head and a tail of ``keep`` tokens in all."""
    head = text[:_prefix_within(text, keep - keep // 2, tokenizer)]
    rest = text[len(head):]
    tail = rest[len(rest) - _prefix_within(rest, keep // 2, tokenizer, from_end=True):]
    omitted = tokenizer.count(text) - tokenizer.count(head) - tokenizer.count(tail)
    return head + TRUNCATION_MARK.format(n=max(1, omitted)) + tail


def _prefix_within(text: str, limit: int, tokenizer: Tokenizer, from_end: bool = False) -> int:
    """Length of the longest prefix (or suffix) of ``text`` counting at most ``limit`` tokens.

    Exponential then binary search on the length, counting only candidate parts, so the
    work is about the size of the part kept, not of the whole text."""
    if limit <= 0 or not text:
        return 0
    count = getattr(tokenizer, "count_uncached", tokenizer.count)

    def fits(length: int) -> bool:
        return count(text[len(text) - length:] if from_end else text[:length]) <= limit

    lo, hi = 0, min(len(text), 4 * limit)
    while hi < len(text) and fits(hi):
        lo, hi = hi, min(len(text), 2 * hi)
    if hi == len(text) and fits(hi):
        return hi
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def memory_message(text: str) -> Message:
    """The one tagged memory message (deterministic id, so the prefix stays cacheable).

    Its text is cleaned like everything sent (a record may quote a tool call's parsed
    arguments, lone surrogates included)."""
    return Message(role="user", content=clean_text(text), id=MEMORY_ID, metadata=mark())
