"""A namespace's own copy of the history, grown in place while the host's history only grows.

An agent loop calls the memory with the same list of message objects plus a new step.
Copying that list, checking the type of every message and comparing it with the previous
call's copy costs the whole history on every call, although only the new step is new.
Instead the namespace keeps one copy and grows it by the new messages; the host's list is
then compared with it by list equality, which CPython decides by identity first for each
element (a pointer comparison), so a call costs what is new. A history that changed any
other way is copied anew.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, overload

from .messages import Message


def grow_copy(copy: list[Message], history: Any) -> bool:
    """Grow ``copy`` in place to equal ``history`` when ``history`` is a list that starts with
    ``copy``'s messages (each the same object, or an equal one) followed by new
    :class:`Message` objects. Returns False, with ``copy`` as it was, otherwise."""
    n = len(copy)
    if not n or type(history) is not list or len(history) < n or history[n - 1] is not copy[-1]:
        return False
    tail = history[n:]
    if not all(type(m) is Message for m in tail):
        return False
    copy.extend(tail)
    if history == copy:  # identity first per element, in C; equal values otherwise
        return True
    del copy[n:]
    return False


class MessagesView(Sequence[Message]):
    """``messages[start:]`` without a copy (slices of it are copies of the part asked for)."""

    __slots__ = ("_items", "_start")

    def __init__(self, items: list[Message], start: int) -> None:
        self._items = items
        self._start = start

    def over(self, items: list[Message]) -> bool:
        """Whether this is a view of ``items`` (that very list)."""
        return self._items is items

    def __len__(self) -> int:
        return len(self._items) - self._start

    @overload
    def __getitem__(self, i: int) -> Message: ...

    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...

    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        n = len(self)
        if isinstance(i, slice):
            a, b, step = i.indices(n)
            return self._items[self._start + a:self._start + b] if step == 1 else self._items[self._start:][i]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("MessagesView index out of range")
        return self._items[self._start + i]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._items, self._start, None)
