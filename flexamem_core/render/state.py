"""The process-local state of each namespace, kept across calls: its index, the chain of
units last matched against a history, the namespace's own copy of that history.

State is loaded from the store (from the index snapshot) the first time a namespace is used,
and dropped when the store says another instance changed the namespace (it wrote to it or
forgot from it), so nothing another process wrote is missed and nothing forgotten is used.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..index.namespace import NamespaceIndex
from ..index.snapshot import NamespaceVersions
from ..model.history import DictSources, PrefixDigests, grow_copy
from ..model.messages import Message, as_messages
from ..model.protocols import Store, Tokenizer
from ..model.schema import Piece, Unit
from ..recall.timeline import count_record_lines
from ..stores import check_namespace
from ..write.notes import EmbeddingInput, PendingNotes
from ..write.units import PackedUnit
from .collector import collector_paused, freeze_bulk


@dataclass
class NamespaceState:
    """One namespace's state: its index, the chain last matched (units, their message
    fingerprints, their messages flattened, and which units hold a user message) and the
    namespace's own copy of the last history it was given."""

    index: NamespaceIndex
    #: Parent key -> keys of the units written after it (a tree: histories may fork).
    children: dict[str | None, list[str]]
    #: Units matched, with their messages' quick fingerprints (empty until first needed).
    chain: list[tuple[Unit, tuple[Any, ...]]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    chain_messages: list[Message] = field(default_factory=list)
    user_units: list[int] = field(default_factory=list)
    #: The namespace's own copy of the last history it was given, grown in place while the
    #: host's history only grows (:mod:`flexamem_core.model.history`), and whether the chain
    #: was matched against it.
    history: list[Message] = field(default_factory=list)
    chain_on_history: bool = False
    #: The message dicts ``history`` was read from, when the host passes dicts.
    sources: DictSources = field(default_factory=DictSources)
    #: The store's version of the namespace this state reflects (``NamespaceVersions``).
    version: str | None = None
    #: Digests of ``history``'s prefixes (a saved request state names the history it was made from).
    digests: PrefixDigests = field(default_factory=PrefixDigests)
    #: The open unit the next step closes as it stands, with its parent's key (``Sync.prefetch``),
    #: and what its write embeds, made ahead by the prefetch.
    closing: tuple[PackedUnit, str | None] | None = None
    prefetched: EmbeddingInput | None = None
    #: Units this process wrote without their pieces' vectors, with those pieces, until the
    #: next call fills them (:mod:`.piece_fill`).
    unfilled: list[tuple[str, list[Piece]]] = field(default_factory=list)
    #: Batches of notes indexed without their vectors, not yet stored, in write order, and how
    #: many of them the background thread has been given (:mod:`.note_fill`).
    backlog: list[PendingNotes] = field(default_factory=list)
    backlog_queued: int = 0

    def accept(self, history: Sequence[Message | Mapping[str, Any]]) -> tuple[list[Message], bool]:
        """The call's history as the namespace's own copy, and whether that copy only grew
        (then it was grown in place at the cost of the new messages)."""
        if grow_copy(self.history, history) or self.sources.grow(self.history, history):
            return self.history, True
        self.history = as_messages(history)
        self.sources.remember(history)
        self.chain_on_history = False
        return self.history, False

    def set_chain(self, chain: list[tuple[Unit, tuple[Any, ...]]], kept: int, body: Sequence[Message]) -> None:
        """Replace the chain, keeping the derived lists of its first ``kept`` units.

        ``chain_messages`` holds the caller's message objects (``body``), not the stored
        units' copies, so the next call with the same objects matches by identity alone
        (a store reopened from disk decodes new objects)."""
        if kept < len(self.units):
            del self.units[kept:]
            n_msgs = sum(len(u.messages) for u in self.units)
            del self.chain_messages[n_msgs:]
            del self.user_units[bisect_left(self.user_units, kept):]
        for pos in range(len(self.units), len(chain)):
            unit = chain[pos][0]
            self.units.append(unit)
            start = len(self.chain_messages)
            self.chain_messages.extend(body[start:start + len(unit.messages)])
            if any(m.role == "user" for m in unit.messages):
                self.user_units.append(pos)
        self.chain = chain

    def add_child(self, unit: Unit) -> None:
        siblings = self.children.setdefault(unit.parent, [])
        if unit.key not in siblings:
            siblings.append(unit.key)

    def newest_user_turn(self, n_old: int) -> Message | None:
        """The newest user message among the first ``n_old`` units of the chain, if any."""
        i = bisect_left(self.user_units, n_old) - 1  # the newest old unit holding a user message
        if i < 0:
            return None
        unit = self.units[self.user_units[i]]
        return next(m for m in reversed(unit.messages) if m.role == "user")

    def stored_chain_keys(self) -> list[str]:
        """The newest chain of the namespace: parents followed back from the last written unit
        (past a forgotten parent, on with the unit written just before)."""
        notes = self.index.notes
        if not notes:
            return []
        parents = {k: p for p, ks in self.children.items() for k in ks}
        position = self.index.position
        chain, seen, key = [], set(), notes[-1].unit_key
        while key is not None and key in position and key not in seen:
            chain.append(key)
            seen.add(key)
            parent = parents.get(key)
            if parent is not None and parent not in position:
                before = position[key] - 1
                parent = notes[before].unit_key if before >= 0 else None
            key = parent
        return chain[::-1]


class Namespaces:
    """The states of the namespaces this process has used, loaded from the store on demand."""

    def __init__(self, store: Store, tokenizer: Tokenizer, bm25_k1: float, bm25_b: float) -> None:
        self.store, self.tokenizer = store, tokenizer
        self.bm25_k1, self.bm25_b = bm25_k1, bm25_b
        self._states: dict[str, NamespaceState] = {}

    def version(self, namespace: str) -> str | None:
        return self.store.namespace_version(namespace) if isinstance(self.store, NamespaceVersions) else None

    def get(self, namespace: str) -> NamespaceState:
        """The namespace's state, loaded from the store where this process has none (or an outdated one)."""
        return self.current(namespace) or self.load(namespace)

    @contextmanager
    def open(self, namespace: str) -> Iterator[NamespaceState]:
        """The namespace's state for one call, loaded from the store with the cyclic collector
        paused (:mod:`.collector`): a load builds about a million long-lived objects at
        10,000 units, frozen before the collector resumes so no later collection walks them."""
        state = self.current(namespace)
        if state is not None:
            yield state
            return
        with collector_paused():
            state = self.load(namespace)
            freeze_bulk(len(state.index.notes))
        yield state

    def current(self, namespace: str) -> NamespaceState | None:
        """The state this process holds for the namespace, if the store has not changed it since
        (another instance wrote to or forgot from it: then the state is dropped)."""
        check_namespace(namespace)
        state = self._states.get(namespace)
        if state is not None and self.version(namespace) != state.version:
            del self._states[namespace]
            state = None
        return state

    def load(self, namespace: str) -> NamespaceState:
        """The namespace's state built from the store (from its index snapshot)."""
        version = self.version(namespace)
        index = NamespaceIndex(self.store, namespace, self.bm25_k1, self.bm25_b)
        if index.notes and index.save_due():  # a store written before snapshots, or by many writers
            self.save_index(index)
        children: dict[str | None, list[str]] = {}
        for key, parent in self.store.parents(namespace).items():
            children.setdefault(parent, []).append(key)
        state = self._states[namespace] = NamespaceState(index, children, version=version)
        return state

    def save_index(self, index: NamespaceIndex) -> None:
        """Snapshot the index with the token count of every record line (reopening is fast)."""
        count_record_lines(index, self.tokenizer)
        index.save(self.tokenizer.name)

    def drop(self, namespace: str) -> None:
        check_namespace(namespace)
        self._states.pop(namespace, None)
