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
from itertools import islice, repeat
from typing import Any, overload

from .messages import Message, MessageError


def _values(dicts: Sequence[Any], key: str) -> list[Any]:
    """``key``'s value in each dict (None where missing), read in C."""
    return list(map(dict.get, dicts, repeat(key)))


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


class DictSources:
    """The message dicts a namespace's copy of the history was read from, so that a call
    bringing the same dicts plus new ones reads only the new ones into :class:`Message`
    objects and grows the copy in place, as :func:`grow_copy` does for ``Message`` lists.

    The dicts are matched by list equality (identity first, so in a pointer comparison
    each while the host passes the same dicts), and so are their ``content`` and
    ``tool_calls`` values: a dict edited in place has a new value there, which breaks the
    match, and the history is then read afresh. Every check is a pass in C over the history
    (no Python code per message); the dicts are read, never changed."""

    __slots__ = ("_calls", "_contents", "_dicts")

    def __init__(self) -> None:
        self._dicts: list[Any] = []
        self._contents: list[Any] = []
        self._calls: list[Any] = []

    def remember(self, history: Any) -> None:
        """What the copy was just read from: ``history`` when it is a list of dicts, else nothing."""
        if type(history) is list and history and set(map(type, history)) == {dict}:
            self._dicts = history[:]
            self._contents = _values(history, "content")
            self._calls = _values(history, "tool_calls")
        else:
            self._dicts, self._contents, self._calls = [], [], []

    def grow(self, copy: list[Message], history: Any) -> bool:
        """Grow ``copy`` (read from the remembered dicts) by ``history``'s new dicts when
        ``history`` is those dicts, unchanged, plus new ones. False, nothing changed, otherwise."""
        n = len(self._dicts)
        if not n or len(copy) != n or type(history) is not list or len(history) < n \
                or history[n - 1] is not self._dicts[-1]:
            return False
        known = history[:n]
        try:
            if not (self._dicts == known and self._contents == _values(known, "content")
                    and self._calls == _values(known, "tool_calls")):
                return False
        except TypeError:  # a mapping that is not a dict, equal to one
            return False
        tail = history[n:]
        if tail and set(map(type, tail)) != {dict}:
            return False
        new = []
        for i, d in enumerate(tail, n):
            try:
                new.append(Message.from_dict(d))
            except MessageError as exc:
                raise MessageError(f"message {i}: {exc}") from None
        copy.extend(new)
        self._dicts.extend(tail)
        self._contents.extend(_values(tail, "content"))
        self._calls.extend(_values(tail, "tool_calls"))
        return True


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
