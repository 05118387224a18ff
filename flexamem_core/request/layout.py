"""A history split into the parts of a request: the fixed prompt (system message and task,
or a reader's current turn), the body that becomes units, and the recent window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from ..model.history import MessagesView
from ..model.messages import Message
from .properties import one_system


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


def split_layout(messages: Sequence[Message], kind: str, shared: bool = False, task: bool | None = None) -> Layout:
    """Agents: system + task (first user message) fixed, the rest is body.
    Readers: system fixed, the current turn (from the last user message on) kept, the rest body;
    with ``task`` also the first user message fixed (where a conversation opens with its task),
    unless it is the current turn itself.

    ``task`` None: the task is fixed for agents only. ``shared`` (agents, ``messages`` a list):
    the body is a view of ``messages``, not a copy (for the namespace's own copy of the
    history, :mod:`flexamem_core.model.history`)."""
    i = 0
    while i < len(messages) and messages[i].role == "system":
        i += 1
    system = one_system(messages[:i])
    keep_task = kind == "agent" if task is None else task
    first: tuple[Message, ...] = (messages[i],) if keep_task and i < len(messages) and messages[i].role == "user" \
        else ()
    if kind == "agent":
        start = i + len(first)
        body: Sequence[Message] = MessagesView(messages, start) if shared and isinstance(messages, list) else \
            tuple(islice(messages, start, None))
        return Layout(system, first, body, ())
    last_user = next((j for j in range(len(messages) - 1, i - 1, -1) if messages[j].role == "user"), None)
    if last_user is None:
        return Layout(system, first, tuple(islice(messages, i + len(first), None)), ())
    if last_user == i:
        first = ()
    start = i + len(first)
    return Layout(system, first, tuple(islice(messages, start, last_user)), tuple(islice(messages, last_user, None)))


def recent_window(unit_tokens: Sequence[int], limit: float) -> int:
    """Number of newest units in the window: the longest run within ``limit``, at least one."""
    n, used = 0, 0
    for t in reversed(unit_tokens):
        if n and used + t > limit:
            break
        used += t
        n += 1
    return n
