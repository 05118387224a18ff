"""A host history converted once, not once per call.

An agent loop renders the same host message objects plus a new step on every call. The
boundary remembers, per memory and per host history (keyed by its first message object),
the host objects of the last call and what the codec made of them; when the next call
brings the same objects, none edited, plus new ones, the codec converts only the new ones
(:meth:`IncrementalCodec.extend`). Anything else (an edit, a fork, a removed message) is
converted afresh (:class:`~flexamem_core.model.history.SeenPrefix`: list equality of the
host objects and of each value the codec's ``edit_keys`` read, passes in C).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..model.history import SeenPrefix, read_attrs, read_keys
from .codec import Converted

H = TypeVar("H")
C = TypeVar("C", bound=Converted)

__all__ = ["MEMO_SIZE", "ConversionMemo", "IncrementalCodec", "memo_of", "read_attrs", "read_keys"]

#: Host histories remembered per memory (one per thread a process serves at once, or more).
MEMO_SIZE = 64


@runtime_checkable
class IncrementalCodec(Protocol):
    """A codec that can extend a conversion by new messages (optional)."""

    #: Each reads, in C, one value of every message of a list that an edit in place replaces
    #: (content, id), as a list: ``lambda ms: list(map(attrgetter("content"), ms))``.
    edit_keys: tuple[Callable[[Sequence[Any]], list[Any]], ...]

    @property
    def memo_key(self) -> Hashable:
        """What besides its class makes this codec convert differently (its settings)."""
        ...

    @property
    def memo_from(self) -> int:
        """How many leading messages the host makes anew for every call (an agent's system
        prompt): they are not remembered, and ``extend`` converts them again."""
        ...

    def extend(self, converted: Any, messages: Sequence[Any], start: int) -> Any:
        """``converted`` (made from an earlier call whose messages from ``memo_from`` on are
        ``messages[memo_from:start]``) extended to all of ``messages``. May reuse
        ``converted``'s containers: it is not used again."""
        ...


@dataclass
class _Entry:
    seen: SeenPrefix
    converted: Any


class ConversionMemo:
    """The last conversion of each host history one memory rendered, newest last."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def convert(self, codec: Any, messages: Sequence[Any]) -> Any:
        """``codec.to_core(messages)``, converting only what is new since this history's last call."""
        skip = getattr(codec, "memo_from", 0) if isinstance(codec, IncrementalCodec) else 0
        if not isinstance(codec, IncrementalCodec) or type(messages) is not list or len(messages) <= skip:
            return codec.to_core(messages)
        key = (type(codec), codec.memo_key, id(messages[skip]))
        with self._lock:
            entry = self._entries.pop(key, None)
        reads = codec.edit_keys
        remembered = messages[skip:] if skip else messages
        if entry is not None and entry.seen.continues(remembered):
            n = len(entry.seen.hosts)
            tail = remembered[n:]
            converted = codec.extend(entry.converted, messages, skip + n) if tail or skip else entry.converted
            entry.seen.add(tail)
            entry.converted = converted
        else:
            converted = codec.to_core(messages)
            entry = _Entry(SeenPrefix(remembered, reads), converted)
        with self._lock:
            self._entries[key] = entry  # holds the keyed message, so its id is not reused while remembered
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return converted


_memos: weakref.WeakKeyDictionary[Any, ConversionMemo] = weakref.WeakKeyDictionary()
_memos_lock = threading.Lock()


def memo_of(mem: Any) -> ConversionMemo:
    """The conversion memo of one memory (made on first use, gone with the memory)."""
    with _memos_lock:
        memo = _memos.get(mem)
        if memo is None:
            memo = _memos[mem] = ConversionMemo()
        return memo
