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

import hashlib
from collections.abc import Callable, Iterator, Sequence
from itertools import islice, repeat
from operator import attrgetter
from typing import Any, overload

from .messages import Message, MessageError


def read_keys(key: str) -> Callable[[Sequence[Any]], list[Any]]:
    """An edit reader for dict messages: the value of ``key`` in each, read in C (``dict.get``;
    a non-dict message makes the list unequal to any other, so the history is read afresh)."""

    def read(messages: Sequence[Any]) -> list[Any]:
        try:
            return list(map(dict.get, messages, repeat(key)))
        except TypeError:
            return [object()]

    return read


def read_attrs(name: str) -> Callable[[Sequence[Any]], list[Any]]:
    """An edit reader for message objects: the attribute ``name`` of each, read in C."""
    getter = attrgetter(name)

    def read(messages: Sequence[Any]) -> list[Any]:
        return list(map(getter, messages))

    return read


#: How many of the newest seen messages are checked for an edit in place on every call.
#: Hosts edit in place near the end of a history (a streamed reply completed, a tool result
#: filled in); reading every message's values on every call would make each call cost the
#: whole history (60,000 LangChain messages: about 8 ms per attribute).
EDIT_WINDOW = 256


class SeenPrefix:
    """The host messages a conversion was made from, and the values of them that an edit in
    place replaces (``reads``), so the next call can tell whether its history is the same
    messages, none edited, plus new ones, and then convert only the new ones.

    Every message is matched by list equality (identity first: a pointer comparison each, in
    C, while the host passes the same objects; equal values otherwise), so a message replaced,
    removed or inserted anywhere is seen. The values the readers take are compared for the
    newest :data:`EDIT_WINDOW` seen messages only: an older message edited in place (the same
    object, new content) is not seen until the history is read afresh, so a host that rewrites
    old messages replaces them with new objects (as LangGraph's ``add_messages`` does)."""

    __slots__ = ("hosts", "reads", "values")

    def __init__(self, hosts: Sequence[Any], reads: Sequence[Callable[[Sequence[Any]], list[Any]]]) -> None:
        self.hosts = list(hosts)
        self.reads = tuple(reads)
        #: Per reader, its values of the newest :data:`EDIT_WINDOW` seen messages.
        self.values = [read(self.hosts[-EDIT_WINDOW:]) for read in self.reads]

    def continues(self, messages: Sequence[Any]) -> bool:
        """Whether ``messages`` starts with the seen messages, none edited."""
        n = len(self.hosts)
        if not n or len(messages) < n or messages[n - 1] is not self.hosts[-1]:
            return False
        known = messages[:n] if len(messages) > n else messages
        recent = known[-EDIT_WINDOW:]
        try:
            return self.hosts == known and all(v == read(recent) for v, read in zip(self.values, self.reads))
        except TypeError:  # an object equal to a seen one that a reader cannot read
            return False

    def add(self, tail: Sequence[Any]) -> None:
        """The new messages a conversion was extended by."""
        self.hosts.extend(tail)
        for values, read in zip(self.values, self.reads):
            values.extend(read(tail[-EDIT_WINDOW:]))
            del values[:-EDIT_WINDOW]


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
    A dict edited in place has a new ``content`` or ``tool_calls`` value, which breaks the
    match (:class:`SeenPrefix`), and the history is then read afresh."""

    __slots__ = ("_seen",)

    READS = (read_keys("content"), read_keys("tool_calls"))

    def __init__(self) -> None:
        self._seen: SeenPrefix | None = None

    def remember(self, history: Any) -> None:
        """What the copy was just read from: ``history`` when it is a list of dicts, else nothing."""
        is_dicts = type(history) is list and history and set(map(type, history)) == {dict}
        self._seen = SeenPrefix(history, self.READS) if is_dicts else None

    def grow(self, copy: list[Message], history: Any) -> bool:
        """Grow ``copy`` (read from the remembered dicts) by ``history``'s new dicts when
        ``history`` is those dicts, unchanged, plus new ones. False, nothing changed, otherwise."""
        seen = self._seen
        if seen is None or len(copy) != len(seen.hosts) or type(history) is not list or not seen.continues(history):
            return False
        n = len(seen.hosts)
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
        seen.add(tail)
        return True


class PrefixDigests:
    """Digests of a history's prefixes, computed once per message: ``at(messages, n)`` names
    ``messages[:n]`` in 16 bytes the same in every process (each digest chains the one before
    with the message's :meth:`~Message.fingerprint`), so a request state saved by one process
    can be checked against another process's history at the cost of its new messages."""

    __slots__ = ("_digests", "_list", "_messages")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._digests: list[bytes] = []
        #: The list last digested: a namespace's own copy of its history, which only grows in
        #: place, so the same list again needs no check of the messages already digested.
        self._list: Sequence[Message] | None = None

    def at(self, messages: Sequence[Message], n: int) -> bytes:
        """The digest of ``messages[:n]`` (b"" for none)."""
        done = len(self._messages)
        if done and (len(messages) < done or messages[done - 1] is not self._messages[-1]
                     or (messages is not self._list and list(messages[:done]) != self._messages)):
            self._messages, self._digests = [], []
            done = 0
        self._list = messages
        digests = self._digests
        last = digests[-1] if digests else b""
        for m in messages[done:n]:
            last = hashlib.blake2b(last + m.fingerprint().encode("ascii"), digest_size=16).digest()
            digests.append(last)
        self._messages.extend(messages[done:n])
        return digests[n - 1] if n else b""


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
