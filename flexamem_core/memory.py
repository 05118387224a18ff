"""``FlexAMem``: ingest a history once, render a fresh memory for every call.

The facade ties the pipeline together: the history is split into the fixed prompt and
units (``units``), complete units are written once as notes (``notes``), and each call
renders the timeline (``timeline``) with recovered detail (``recovery``) inside the
allowance left by the prompt and the recent window (``render``).
"""

from __future__ import annotations

import asyncio
import math
import operator
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .cache.prefix import common_prefix_tokens
from .cache.stable import SentRequest, append_new, extend_memory, head_units, shift_for_head, stable_budget
from .config import FlexAMemConfig
from .index.embeddings import default_embedder, normalize
from .index.namespace import NamespaceIndex
from .index.snapshot import NamespaceVersions
from .index.warm import catch_up, warm_embedder, warm_in_background
from .logs import logged_render, warn_once
from .model.history import MessagesView, grow_copy
from .model.messages import Message, MessageError, as_messages, quick_fingerprint
from .model.protocols import Embedder, RecordWriter, Store, Tokenizer
from .model.schema import Note, Unit, UnitKind
from .recall.auto import auto_plan
from .recall.recovery import (
    MemoryRender,
    candidates,
    excerpt_scores,
    focus_first,
    memory_wrapper_tokens,
    piece_recovery,
    unit_recovery,
)
from .recall.report import count_resolutions
from .recall.timeline import Timeline, TimelineLevels, count_record_lines
from .render.collector import collector_paused, freeze_bulk
from .request.properties import apply_properties, sendable, step_status
from .request.render import (
    PER_MESSAGE,
    BudgetError,
    Layout,
    Rendered,
    count_messages,
    exceeds,
    fit_fixed,
    fit_messages,
    memory_message,
    recent_window,
    split_layout,
)
from .request.sendable import PINNED_MIN_TOKENS, check_extra_tokens, enforce_part, passthrough
from .request.tokens import default_tokenizer
from .stores import InMemoryStore, check_namespace
from .write.notes import NoteWriter
from .write.units import (
    DIGEST_FORMAT,
    PackedUnit,
    StoredUnit,
    action_text,
    messages_digest,
    next_step,
    pack_units,
    split_steps,
    to_unit,
    unit_key,
)
from .write.writers import RuleRecordWriter


class _Chained(Sequence[Unit | PackedUnit]):
    """The stored units followed by the open one, if any, without copying the stored list."""

    def __init__(self, units: Sequence[Unit], tail: PackedUnit | None) -> None:
        self.units, self.tail = units, tail

    def __len__(self) -> int:
        return len(self.units) + (self.tail is not None)

    def __getitem__(self, i):  # type: ignore[no-untyped-def,override]  # positions only: no slice is taken
        if i < 0:
            i += len(self)
        if self.tail is not None and i == len(self.units):
            return self.tail
        return self.units[i]

    def newest(self, n: int) -> list[Unit | PackedUnit]:
        """The newest ``n`` units, oldest first."""
        if n <= 0:
            return []
        if self.tail is None:
            return list(self.units[len(self.units) - n:])
        return [*self.units[len(self.units) - n + 1:], self.tail]


def _newest_sizes(units: Sequence[Unit | PackedUnit], tk: Tokenizer, limit: float) -> list[int]:
    """Token sizes of the newest units, oldest first, only as far back as the window can reach."""
    sizes: list[int] = []
    used = 0
    for u in reversed(units):
        size = count_messages(u.messages, tk) - 3
        sizes.append(size)
        used += size
        if used > limit:
            break
    return sizes[::-1]


@dataclass
class _Namespace:
    """Process-local state of one namespace, kept across calls: its index, the chain last
    matched (units, their message fingerprints, their messages flattened, and which units
    hold a user message), the incremental timeline and the previous request."""

    index: NamespaceIndex
    children: dict[str | None, list[str]]
    #: Units matched, with their messages' quick fingerprints (empty until first needed).
    chain: list[tuple[Unit, tuple[Any, ...]]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    chain_messages: list[Message] = field(default_factory=list)
    user_units: list[int] = field(default_factory=list)
    sent: SentRequest | None = None
    #: The namespace's own copy of the last history it was given, grown in place while the
    #: host's history only grows (:mod:`.grown`), and whether the chain was matched against it.
    history: list[Message] = field(default_factory=list)
    chain_on_history: bool = False
    #: The store's version of the namespace this state reflects (``NamespaceVersions``).
    version: str | None = None

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


@dataclass
class _Synced:
    units: list[Unit]
    tail: PackedUnit | None
    written: int


class FlexAMem:
    """Write-once memory rendered per call. See ``docs`` in the README for the method."""

    def __init__(self, config: FlexAMemConfig | None = None, *, store: Store | None = None,
                 tokenizer: Tokenizer | None = None, embedder: Embedder | None = None,
                 writer: RecordWriter | None = None, **settings: Any) -> None:
        base = config or FlexAMemConfig()
        self.config = FlexAMemConfig(**{**base.model_dump(exclude_unset=True), **settings}) if settings else base
        self.store: Store = store if store is not None else InMemoryStore()
        self.tokenizer: Tokenizer = tokenizer or default_tokenizer()
        self._embedder = embedder
        self.writer: RecordWriter = writer or RuleRecordWriter(self.config.record_words,
                                                               self.config.merged_record_words)
        self._spaces: dict[str, _Namespace] = {}
        self._lock = threading.RLock()
        #: The last query's texts and vectors (:meth:`_embed_query`).
        self._last_query: tuple[tuple[str, ...], np.ndarray] | None = None
        self.warming: threading.Thread | None = \
            warm_in_background(lambda: self.embedder) if self.config.warm == "background" else None

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def warm(self) -> float:
        """Load the embedder now (MiniLM: seconds, once per process) so the first render does
        not wait for it; returns the seconds taken. ``warm="background"`` does this at creation."""
        return warm_embedder(self.embedder)

    # ------------------------------------------------------------------ state
    def _store_version(self, namespace: str) -> str | None:
        return self.store.namespace_version(namespace) if isinstance(self.store, NamespaceVersions) else None

    def _space(self, namespace: str) -> _Namespace:
        """The namespace's state, loaded from the store where this process has none (or an
        outdated one)."""
        return self._current_space(namespace) or self._load_space(namespace)

    @contextmanager
    def _call_space(self, namespace: str) -> Iterator[_Namespace]:
        """The namespace's state for one call, loaded from the store with the cyclic collector
        paused (:mod:`.collector`): the load builds about a million long-lived objects at
        10,000 units, and a full collection walked them all inside the call. They are frozen
        before the collector resumes, so no later collection walks them again."""
        space = self._current_space(namespace)
        if space is not None:
            yield space
            return
        with collector_paused():
            space = self._load_space(namespace)
            freeze_bulk(len(space.index.notes))
        yield space

    def _current_space(self, namespace: str) -> _Namespace | None:
        """The state this process holds for the namespace, if the store has not changed it
        since (another instance wrote to or forgot from it: then the state is dropped, so it
        is rebuilt from the store and nothing it wrote is missed or forgot is used)."""
        check_namespace(namespace)
        space = self._spaces.get(namespace)
        if space is not None and self._store_version(namespace) != space.version:
            del self._spaces[namespace]
            space = None
        return space

    def _load_space(self, namespace: str) -> _Namespace:
        """The namespace's state built from the store (from its index snapshot)."""
        version = self._store_version(namespace)
        index = NamespaceIndex(self.store, namespace, self.config.bm25_k1, self.config.bm25_b)
        if index.notes and index.save_due():  # a store written before snapshots, or by many writers
            self._save_index(index)
        children: dict[str | None, list[str]] = {}
        for key, parent in self.store.parents(namespace).items():
            children.setdefault(parent, []).append(key)
        space = self._spaces[namespace] = _Namespace(index, children, version=version)
        return space

    def _save_index(self, index: NamespaceIndex) -> None:
        """Snapshot the index with the token count of every record line (reopening is fast)."""
        count_record_lines(index, self.tokenizer)
        index.save(self.tokenizer.name)

    def count_messages(self, messages: Sequence[Message | Mapping[str, Any]], extra_tokens: int = 0) -> int:
        """Exact token count of a request as FlexA-Mem budgets it."""
        return count_messages(as_messages(messages), self.tokenizer, extra_tokens)

    # ------------------------------------------------------------------ ingestion
    def _sync(self, space: _Namespace, namespace: str, body: Sequence[Message], final: bool,
              progress: Any = None) -> _Synced:
        """Match the body against the stored chain, pack the rest, write complete units.

        The usual call brings the same message objects as the last one plus new ones: one
        identity pass (in C) confirms the whole chain, and only the new messages are packed.
        A body that is a view of the namespace's own copy of the history, which only grew
        since the chain was matched against it, needs no pass at all.
        """
        kind = self.config.history
        flat = space.chain_messages
        on_history = isinstance(body, MessagesView) and body.over(space.history)
        known = on_history and space.chain_on_history
        space.chain_on_history = False
        if flat and len(body) >= len(flat) and body[len(flat) - 1] is flat[-1] and \
                (known or all(map(operator.is_, body, flat))):
            matched, i = list(space.chain), len(flat)  # the same objects as last call: all units still match
        else:
            matched, i = [], 0
            for unit, fps in space.chain:
                n = len(unit.messages)
                if i + n > len(body):
                    break
                fps = fps or tuple(map(quick_fingerprint, unit.messages))
                if all(a is b or quick_fingerprint(a) == fp for a, b, fp in zip(body[i:i + n], unit.messages, fps)):
                    matched.append((unit, fps))
                    i += n
                else:
                    break
        kept = len(matched)
        parent = matched[-1][0].key if matched else None
        # units stored earlier (another process, or before a restart): a reopened chain of
        # 10,000 units is matched with the collector paused, as the namespace was loaded
        with collector_paused() if not kept and space.index.notes else nullcontext():
            while True:
                found = None
                for key in reversed(space.children.get(parent, [])):
                    found = self._stored_match(space, namespace, key, body, i, kind, parent)
                    if found is not None:
                        break
                if found is None:
                    break
                matched.append((found, ()))  # fingerprints made when first needed: most chains match by identity
                i += len(found.messages)
                parent = found.key
            if not kept:
                freeze_bulk(len(matched))
        first_step = next_step(matched[-1][0]) if matched else 1
        packed = pack_units(body[i:], kind, self.tokenizer,
                            self.config.agent_unit_tokens if kind == "agent" else self.config.reader_unit_tokens,
                            first_step=first_step, final=final)
        new_units: list[Unit] = []
        tail = None
        for p in packed:
            if not p.closed:
                tail = p
                break
            unit = to_unit(p, kind, parent)
            new_units.append(unit)
            parent = unit.key
        with catch_up(len(new_units), namespace, progress) as bar:
            written = NoteWriter(self.config, self.tokenizer, self.embedder, self.writer).write(
                self.store, space.index, new_units, bar) if new_units else 0
        if written:
            space.version = self._store_version(namespace)  # our own writes (a racing one shows next time)
            if space.index.save_due():
                self._save_index(space.index)
        for unit in new_units:
            siblings = space.children.setdefault(unit.parent, [])
            if unit.key not in siblings:
                siblings.append(unit.key)
            matched.append((unit, tuple(quick_fingerprint(m) for m in unit.messages)))
        space.set_chain(matched, kept, body)
        space.chain_on_history = on_history
        return _Synced(space.units, tail, written)

    def _accept(self, space: _Namespace, history: Sequence[Message | Mapping[str, Any]]) -> tuple[list[Message], bool]:
        """The call's history as the namespace's own copy, and whether that copy only grew
        (then it was grown in place at the cost of the new messages, :func:`.grown.grow_copy`)."""
        if grow_copy(space.history, history):
            return space.history, True
        space.history = as_messages(history)
        space.chain_on_history = False
        return space.history, False

    def _stored_match(self, space: _Namespace, namespace: str, key: str, body: Sequence[Message],
                      i: int, kind: UnitKind, parent: str | None) -> Unit | None:
        """The stored unit ``key`` if the body continues with it at ``i``, else None.

        The key is the content address of the messages, kind and parent, so hashing the
        caller's messages checks them all; the note says how many messages to hash, and
        the unit's own body is read from the store only when it is used (a reopened chain
        of 10,000 units would otherwise decode every one of them).
        """
        note = space.index.note(key) if key in space.index.position else None
        if note is not None and note.messages:
            n = note.messages
            if i + n > len(body):
                return None
            if note.digest.startswith(DIGEST_FORMAT):  # key is a child of parent: the digest checks the rest
                if messages_digest(body[i:i + n], kind) != note.digest:
                    return None
            elif unit_key(body[i:i + n], kind, parent) != key:
                return None
            return StoredUnit.lazy(self.store, namespace, key, kind, tuple(body[i:i + n]), parent,
                                   note.first_step)
        stored = self.store.get_unit(namespace, key)
        n = len(stored.messages)
        if i + n <= len(body) and stored.kind == kind and unit_key(body[i:i + n], kind, parent) == key:
            return stored
        return None

    def ingest(self, history: Sequence[Message | Mapping[str, Any]], *, namespace: str = "default",
               final: bool = False, progress: Any = None) -> int:
        """Write the complete units of ``history`` not yet stored; returns how many were new.

        ``final=True`` also writes the last, still open unit (a finished conversation).
        Idempotent: the same history, or the history plus new messages, writes only new units.
        """
        if type(history) is not list:  # a tuple or another iterable: converted once, here (a clear error
            history = as_messages(history)  # for what is not a history, before any state is touched)
        with self._lock, self._call_space(namespace) as space:
            msgs, grew = self._accept(space, history)
            layout = split_layout(msgs, self.config.history, shared=grew)
            body = [*layout.body, *layout.current] if final and layout.current else layout.body
            synced = self._sync(space, namespace, body, final, progress)
            return synced.written

    # ------------------------------------------------------------------ rendering
    @logged_render
    def render(self, history: Sequence[Message | Mapping[str, Any]], *, namespace: str = "default",
               budget: int | None = None, query: str | None = None, extra_tokens: int = 0) -> Rendered:
        """Messages to send for this call: the history itself when it fits, else the
        fixed prompt, one memory message and the recent window. Never mutates ``history``.

        With ``cache_stable`` (the agent default) consecutive calls of a namespace keep a
        stable request prefix: see :mod:`flexamem_core.cache.stable` for the rule.
        """
        if type(history) is not list:  # a tuple or another iterable: converted once, here (a clear error
            history = as_messages(history)  # for what is not a history, before any state is touched)
        cfg = self.config if budget is None else self.config.with_budget(budget)
        extra_tokens = check_extra_tokens(extra_tokens)
        if query is not None and not isinstance(query, str):
            raise MessageError(f"query must be a string or None, not {type(query).__name__}")
        stable = cfg.cache_stable and cfg.history == "agent"
        with self._lock, self._call_space(namespace) as space:
            msgs, grew = self._accept(space, history)
            previous = space.sent if stable else None
            # The previous request's history is the namespace's copy, which only grew since: no
            # pass over the history is needed to know this call continues it.
            grown = previous is not None and (
                (grew and previous.source is msgs and previous.same_call(cfg.budget, extra_tokens, query))
                or previous.continues(msgs, cfg.budget, extra_tokens, query))
            if grown:
                assert previous is not None
                rendered = append_new(previous, msgs, cfg, self.tokenizer)
                if rendered is not None:
                    self._sync(space, namespace, split_layout(msgs, cfg.history, shared=grew).body, False)
                    rendered.report["newest_step"] = step_status(rendered.messages, msgs, cfg.history)
                    space.sent = previous.after(msgs, rendered)
                    return rendered
            layout = split_layout(msgs, cfg.history, shared=grew)
            passed = None
            if not exceeds(msgs, self.tokenizer, cfg.effective_budget, extra_tokens):
                self._sync(space, namespace, layout.body, False)
                passed = passthrough(msgs, cfg, self.tokenizer, extra_tokens)

            def attempt(fitted: Layout) -> Rendered:
                if not stable:
                    return self._render(space, namespace, cfg, fitted, query, extra_tokens)
                extended = None
                if grown:
                    assert previous is not None
                    synced = self._sync(space, namespace, fitted.body, False)
                    extended = extend_memory(self, space, previous, fitted, cfg, extra_tokens, synced)
                # A thread followed call by call leaves room to append; a first render (a
                # one-off call, or the first after a restart) has no previous request to keep.
                # The first render after the history was sent whole keeps its oldest units where
                # they were sent (``stable_head``): they stay a cached prefix.
                head = cfg.stable_head and previous is not None and bool(previous.report.get("passthrough"))
                return extended or (
                    self._render_stable(space, namespace, cfg, fitted, query, extra_tokens, head) if previous
                    else self._render(space, namespace, cfg, fitted, query, extra_tokens, stable=True))

            rendered = passed if passed is not None else self._render_fitted(layout, cfg, extra_tokens, namespace,
                                                                              attempt)
            if stable:
                prefix = common_prefix_tokens(previous.messages, rendered.messages, self.tokenizer) \
                    if previous is not None else 0
                rendered.report["cache"] = {"step": "render", **rendered.report.get("cache", {}), "appended": False,
                                            "reused_prefix_tokens": min(prefix, rendered.tokens)}
            rendered.report["newest_step"] = step_status(rendered.messages, msgs, cfg.history)
            if stable:
                space.sent = SentRequest.of(cfg.budget, extra_tokens, query, msgs, rendered)
            return rendered

    def _fit_fixed(self, layout: Layout, cfg: FlexAMemConfig, extra_tokens: int, namespace: str,
                   limit: int | None = None) -> tuple[Layout, int]:
        """The task (agents) or current turn (readers) cut, with the mark, to ``limit``: by default
        ``B_bar`` less the recent window's share (``window_share * B``, so the steps after it keep
        room), the system prompt and ``extra_tokens`` counted in it. One WARNING per namespace."""
        if limit is None:
            limit = cfg.effective_budget - int(cfg.window_share * cfg.budget)
        fitted, n_cut = fit_fixed(layout, limit, self.tokenizer, extra_tokens)
        if n_cut:
            part = "task" if layout.task else "current turn"
            warn_once(f"fixed-cut:{namespace}",
                      "render %s: the %s (%d tokens) is larger than the room the budget %d leaves it; "
                      "it is cut in the middle with a visible mark (the store keeps it whole)", namespace, part,
                      count_messages(list(layout.task or layout.current), self.tokenizer), cfg.budget)
        return fitted, n_cut

    def _render_fitted(self, layout: Layout, cfg: FlexAMemConfig, extra_tokens: int, namespace: str,
                       attempt: Callable[[Layout], Rendered]) -> Rendered:
        """``attempt`` on the layout with its task or current turn fitted (:meth:`_fit_fixed`); when
        even then the newest step cannot fit, once more with that part cut to its marks. The
        report's ``task_cut_messages`` counts the messages cut."""
        fitted, n_cut = self._fit_fixed(layout, cfg, extra_tokens, namespace)
        try:
            rendered = attempt(fitted)
        except BudgetError:
            bones, n_bones = self._fit_fixed(layout, cfg, extra_tokens, namespace, limit=0)
            tk = self.tokenizer
            if not n_bones or count_messages([*bones.fixed, *bones.current], tk) >= \
                    count_messages([*fitted.fixed, *fitted.current], tk):
                raise
            rendered, n_cut = attempt(bones), n_bones
        rendered.report["task_cut_messages"] = n_cut
        return rendered

    def _render_stable(self, space: _Namespace, namespace: str, cfg: FlexAMemConfig, layout: Layout,
                       query: str | None, extra_tokens: int, head: bool = False) -> Rendered:
        """A fresh render for ``stable_target`` of the budget (room for the next calls to
        append); at the full budget instead if the newest step would have to be cut. ``head``:
        the oldest old units stay verbatim ahead of the memory (:func:`.stable.head_units`)."""
        fixed = layout.fixed
        low = cfg.with_budget(min(cfg.budget, stable_budget(cfg, count_messages(fixed, self.tokenizer, extra_tokens))))
        try:
            rendered = self._render(space, namespace, low, layout, query, extra_tokens, stable=True, head=head)
        except BudgetError:
            rendered = None
        if rendered is not None and rendered.report["old_units"]:
            # A big newest unit can take nearly all of the reduced budget: the memory keeps
            # ``stable_target`` of the allowance the whole budget gives it, the rest is for appending.
            allowance = rendered.report["allowance"]
            want = math.ceil(cfg.stable_target * (allowance + cfg.effective_budget - low.effective_budget))
            if allowance < want:
                mid = low.effective_budget + want - allowance
                low = cfg.with_budget(min(cfg.budget, math.ceil(mid / cfg.safety_margin)))
                rendered = self._render(space, namespace, low, layout, query, extra_tokens, stable=True, head=head)
        if rendered is None or rendered.report["newest_unit_cut_messages"] or \
                rendered.report["newest_unit_dropped_steps"]:
            return self._render(space, namespace, cfg, layout, query, extra_tokens, stable=True, head=head)
        rendered.report.update(budget=cfg.budget, effective_budget=cfg.effective_budget,
                               render_budget=low.budget)
        return rendered

    async def arender(self, history: Sequence[Message | Mapping[str, Any]], **kwargs: Any) -> Rendered:
        """Async twin of :meth:`render` (runs in a worker thread)."""
        return await asyncio.to_thread(self.render, history, **kwargs)

    @logged_render
    def render_question(self, question: str, *, namespace: str = "default", budget: int | None = None,
                        system_prompt: str = "") -> Rendered:
        """Reader use: render a namespace's stored history for a question."""
        for name, value in (("question", question), ("system_prompt", system_prompt)):
            if not isinstance(value, str):
                raise MessageError(f"{name} must be a string, not {type(value).__name__}")
        msgs: list[Message] = [Message(role="system", content=system_prompt)] if system_prompt else []
        msgs.append(Message(role="user", content=question))
        cfg = self.config if budget is None else self.config.with_budget(budget)
        with self._lock, self._call_space(namespace) as space:
            units = self._stored_chain(space, namespace)
            layout = Layout(msgs[0] if system_prompt else None, (), (), (msgs[-1],))
            rendered = self._render_fitted(layout, cfg, 0, namespace,
                                           lambda fitted: self._render(space, namespace, cfg, fitted, None, 0,
                                                                       units=units))
            rendered.report["newest_step"] = step_status(rendered.messages, msgs, "reader")
            return rendered

    def _stored_chain(self, space: _Namespace, namespace: str) -> list[Unit]:
        """The newest chain of the namespace: follow parents back from the last written unit."""
        notes = space.index.notes
        if not notes:
            return []
        parents = {k: p for p, ks in space.children.items() for k in ks}
        position = space.index.position
        chain, key = [], notes[-1].unit_key
        while key is not None and key in position and key not in chain:
            chain.append(key)
            parent = parents.get(key)
            if parent is not None and parent not in position:
                # the parent was forgotten: go on with the unit written just before this one
                before = position[key] - 1
                parent = notes[before].unit_key if before >= 0 else None
            key = parent
        return [self.store.get_unit(namespace, k) for k in reversed(chain)]

    def _render(self, space: _Namespace, namespace: str, cfg: FlexAMemConfig, layout: Layout,
                query: str | None, extra_tokens: int, units: list[Unit] | None = None,
                stable: bool = False, chat_window: bool = True, head: bool = False) -> Rendered:
        tk = self.tokenizer
        b_bar = cfg.effective_budget
        kind = cfg.history if units is None else "reader"  # a stored history asked a question: no window
        if units is None:
            synced = self._sync(space, namespace, layout.body, False)
            units, tail = synced.units, synced.tail
        else:
            tail = None
        fixed = layout.fixed
        fixed_tokens = count_messages(fixed + list(layout.current), tk, extra_tokens)
        if fixed_tokens > b_bar:
            raise BudgetError(
                f"budget {cfg.budget} (usable {b_bar}) is too small for the fixed prompt "
                f"({fixed_tokens} tokens: system prompt, tool schemas, and the task or current turn "
                "cut down to its marks)")
        # Recent window (agents): the longest run of newest units within window_share * B.
        window_units: list[Unit | PackedUnit] = []
        if kind == "agent":
            # the stored units, then the open one (packed, not stored): only the newest are walked
            all_units = _Chained(units, tail)
            n_win = recent_window(_newest_sizes(all_units, tk, cfg.window_share * cfg.budget),
                                  cfg.window_share * cfg.budget) if len(all_units) else 0
            window_units = all_units.newest(n_win)
            old = units[: len(all_units) - n_win]
        else:
            # A chat's open unit (the previous exchange) is its recent window, whatever its size:
            # the newest turns stay verbatim (cut in the middle only if they alone are over);
            # only if even cut it cannot fit does it become an old unit, as the paper has it.
            old = list(units)
            window_units = [tail] if tail is not None else []
            if tail is not None and not chat_window and \
                    count_messages(tail.messages, tk) - 3 > cfg.window_share * cfg.budget:
                window_units = []
                old = list(self._sync(space, namespace, layout.body, True).units)
        n_window = sum(len(u.messages) for u in window_units)
        head_list: list[Unit] = []
        if head and kind == "agent" and len(old) > 1:
            base = count_messages([*fixed, *layout.body[len(layout.body) - n_window:]], tk, extra_tokens)
            head_list = head_units(old, space.index, tk, b_bar - base - PER_MESSAGE)
            old = old[len(head_list):]
        # The window is the body's newest messages: send the caller's own objects.
        window_src = list(layout.body[len(layout.body) - n_window:]) if kind == "agent" and \
            n_window <= len(layout.body) else [m for u in window_units for m in u.messages]
        window = enforce_part(window_src)
        current = enforce_part(layout.current)
        window_msgs, n_repairs = window.messages, window.repairs + current.repairs
        n_head = sum(len(u.messages) for u in head_list)
        head_msgs = [sendable(m) for m in layout.body[:n_head]]
        if head_msgs:
            fixed_tokens = count_messages([*fixed, *head_msgs, *layout.current], tk, extra_tokens)
        pinned_src = [sendable(m) for m in self._pinned_turn(space, len(head_list) + len(old), window_msgs, kind)]
        # A human turn over the window's share is cut like any oversized message; down to its
        # bones if the newest unit needs the room (the newest step comes first).
        chat = kind != "agent"
        pinned, n_pinned_cut, window_fit = self._fit_tail(pinned_src, window_msgs, b_bar - fixed_tokens,
                                                          max(PINNED_MIN_TOKENS, int(cfg.window_share * cfg.budget)),
                                                          chat)
        if pinned_src and window_fit[3] > window_fit[4]:
            pinned, n_pinned_cut, window_fit = self._fit_tail(pinned_src, window_msgs, b_bar - fixed_tokens,
                                                              PINNED_MIN_TOKENS, chat)
        window_msgs, n_cut, n_dropped = window_fit[:3]
        head = [*(sendable(m) for m in fixed), *head_msgs]
        tail_msgs = [*pinned, *window_msgs, *current.messages]
        base = count_messages(head + tail_msgs, tk, extra_tokens)
        allowance = b_bar - base - PER_MESSAGE
        ref_allowance = b_bar - fixed_tokens - int(cfg.window_share * cfg.budget) - PER_MESSAGE \
            if kind == "agent" else allowance
        index = space.index
        notes = index.notes_of_units(old)
        mem = self._memory(space, cfg, notes, allowance, max(allowance, ref_allowance), layout,
                           window_units, query, stable) if notes else None
        messages = list(head)
        if mem is not None and mem.tokens <= allowance:
            messages.append(memory_message(mem.text))
        messages.extend(tail_msgs)
        final = apply_properties(messages)  # the parts obey the rules; this checks the whole
        messages, n_repairs = final.messages, n_repairs + final.repairs
        tokens = count_messages(messages, tk, extra_tokens)
        if head_list and (tokens > b_bar or n_cut or n_dropped or n_pinned_cut or
                          (notes and (mem is None or mem.tokens > allowance))):
            # the head may not cost the newest step a cut or the memory its place: none this call
            return self._render(space, namespace, cfg, layout, query, extra_tokens, stable=stable)
        if tokens > b_bar and kind == "reader" and chat_window and window_units:
            # even cut, the chat's open unit does not fit: it joins the old units instead
            return self._render(space, namespace, cfg, layout, query, extra_tokens, stable=stable, chat_window=False)
        if tokens > b_bar:
            raise BudgetError(
                f"budget {cfg.budget} (usable {b_bar}) cannot hold the fixed prompt and the newest "
                f"step even after cutting its outputs ({tokens} tokens)")
        report: dict[str, Any] = {
            "passthrough": False, "mode": cfg.mode, "history": kind, "budget": cfg.budget,
            "effective_budget": b_bar, "total_tokens": tokens, "prompt_tokens": fixed_tokens,
            "window_tokens": base - fixed_tokens + 3 if tail_msgs else 0,
            "window_units": len(window_units), "old_units": len(old), "newest_unit_cut_messages": n_cut,
            "window_messages": len(window_msgs) if not (n_cut or n_dropped or n_repairs or n_pinned_cut) else None,
            "pairing_repairs": n_repairs, "newest_unit_dropped_steps": n_dropped,
            "pinned_turn_cut_messages": n_pinned_cut,
            "sanitised_messages": sum(1 for m in messages if m.metadata.get("flexamem_sanitised")),
            "allowance": allowance, "reference_allowance": ref_allowance,
            "memory_tokens": mem.tokens if mem else 0,
            "unused_allowance": max(0, allowance - (mem.tokens if mem and mem.tokens <= allowance else 0)),
            "spent": mem.spent if mem else {"timeline": 0, "raw": 0, "excerpt": 0, "pieces": 0},
            "units": mem.units if mem else [], "unit_runs": mem.unit_runs if mem else [],
            "resolutions": count_resolutions(mem.unit_runs if mem else [], mem.units if mem else []),
            "pieces": mem.pieces if mem else [],
            "llm_calls": mem.llm_calls if mem else 0,
            "recovered_dropped": mem.dropped if mem else 0,
        }
        if cfg.mode == "auto":
            report["auto"] = mem.auto if mem else {"recovery": "none", "why": "no old units to remember"}
        if head_list:
            shift_for_head(report, [index.note(u.key) for u in head_list], len(head_msgs))
        return Rendered(messages, mem.text if mem and mem.tokens <= allowance else None, tokens, report)

    def _fit_tail(self, pinned: list[Message], window: list[Message], room: int, pinned_cap: int,
                  chat: bool = False) -> tuple[list[Message], int, tuple[list[Message], int, int, int, int]]:
        """The pinned turn cut to ``pinned_cap``, then the window fitted to the room left.

        Returns the pinned turn, its cuts, and (window, cuts, dropped steps, window tokens, room)."""
        tk = self.tokenizer
        n_pinned_cut = 0
        if pinned and count_messages(pinned, tk) - 3 > pinned_cap:
            pinned, n_pinned_cut = fit_messages(pinned, pinned_cap, tk)
        room_for_window = room - (count_messages(pinned, tk) - 3 if pinned else 0)
        n_cut = n_dropped = 0
        if window and count_messages(window, tk) - 3 > room_for_window:
            window, n_cut, n_dropped = self._fit_window(window, room_for_window, chat)
        used = count_messages(window, tk) - 3 if window else 0
        return pinned, n_pinned_cut, (window, n_cut, n_dropped, used, room_for_window)

    def _fit_window(self, window: list[Message], room: int, chat: bool = False) -> tuple[list[Message], int, int]:
        """The newest unit alone over the budget: cut its largest outputs (marked); if that is
        not enough, leave out its oldest whole steps (never the newest) for this call."""
        steps = split_steps(window)
        dropped = 0
        while True:
            msgs = [m for s in steps for m in s]
            fitted, n_cut = fit_messages(msgs, room, self.tokenizer, outputs_first=not chat)
            if count_messages(fitted, self.tokenizer) - 3 <= room or len(steps) == 1:
                return fitted, n_cut, dropped
            steps = steps[1:]
            dropped += 1

    def _pinned_turn(self, space: _Namespace, n_old: int, window: Sequence[Message],
                     kind: str | None = None) -> list[Message]:
        """Agents: the newest user turn stays visible even when its unit left the window.

        ``kind`` is how this call reads the history: a question over a stored agent history
        (``render_question``) is a reader's call, so no old turn is pinned before it."""
        if (kind or self.config.history) != "agent" or not self.config.pin_user_turn or not n_old:
            return []
        if any(m.role == "user" for m in window):
            return []
        i = bisect_left(space.user_units, n_old) - 1  # the newest old unit holding a user message
        if i < 0:
            return []
        unit = space.units[space.user_units[i]]
        return [next(m for m in reversed(unit.messages) if m.role == "user")]

    def _timeline(self, space: _Namespace, cfg: FlexAMemConfig, notes: Sequence[Note], target: float) -> Timeline:
        """The timeline merged down to ``target``: incrementally when the old units are the
        index's first notes (the usual case), else from scratch."""
        index = space.index
        if notes and index.is_prefix(notes[0].unit_key, notes[-1].unit_key, len(notes)):
            levels = index.derived.get("timeline")
            if levels is None or levels.writer is not self.writer or levels.fanin != cfg.merge_fanin:
                levels = index.derived["timeline"] = TimelineLevels(index, self.writer, self.tokenizer,
                                                                     cfg.merge_fanin)
            return levels.build(notes, target)
        timeline = Timeline(notes, index, self.writer, self.tokenizer, cfg.merge_fanin)
        timeline.merge_down_to(target)
        return timeline

    def _queries(self, cfg: FlexAMemConfig, layout: Layout, window_units: Sequence[Unit | PackedUnit],
                 query: str | None) -> tuple[np.ndarray, str, str]:
        """The query of a call: its vector (the one model call of a render) and the texts
        that BM25 scores excerpts and pieces by. Agents: the task and the newest unit; when
        the caller (``query``) or a human turn of the newest unit asks for something, its
        own words score the excerpts and pieces (a newest unit full of output would drown them)."""
        task_text = "\n".join(m.text for m in layout.task)
        newest = window_units[-1].raw if window_units else ""
        question = "\n".join(m.text for m in layout.current)
        extra = query or ""
        if cfg.history == "agent" and not question:
            q_vec = normalize(sum(self._embed_query([t for t in (task_text, newest, extra) if t]),
                                  np.zeros(self.embedder.dim, dtype=np.float32)))
            focus = self._focus(cfg, window_units, query)
            if focus:
                return q_vec, focus, focus
            return q_vec, "\n".join(t for t in (newest, extra) if t), \
                "\n".join(t for t in (task_text, newest, extra) if t)
        q_text = "\n".join(t for t in (question, extra) if t) or task_text
        return self._embed_query([q_text])[0], q_text, q_text

    def _embed_query(self, texts: list[str]) -> np.ndarray:
        """The query's vectors, embedded once per call: a cache-stable render that renders
        again at another budget, or extends and then renders, asks for the same texts."""
        key = tuple(texts)
        if self._last_query is not None and self._last_query[0] == key:
            return self._last_query[1]
        vecs = np.array(self.embedder.embed(texts), copy=True)
        vecs.setflags(write=False)
        self._last_query = (key, vecs)
        return vecs

    @staticmethod
    def _focus(cfg: FlexAMemConfig, window_units: Sequence[Unit | PackedUnit], query: str | None) -> str:
        """What this agent call is asked, in words: ``query``, else the newest human turn of the
        newest unit (only where user messages are human turns: ``pin_user_turn``)."""
        if query:
            return query
        if not cfg.pin_user_turn or not window_units:
            return ""
        msgs = window_units[-1].messages
        for i in range(len(msgs) - 1, -1, -1):
            if msgs[i].role == "user":
                # the observation of a text action (a command in a code block) is not a question
                answers_action = i > 0 and msgs[i - 1].role == "assistant" and bool(action_text(msgs[i - 1]))
                return "" if answers_action else msgs[i].text
        return ""

    def _memory(self, space: _Namespace, cfg: FlexAMemConfig, notes: list[Note], allowance: int,
                size_allowance: int, layout: Layout, window_units: Sequence[Unit | PackedUnit],
                query: str | None, stable: bool = False) -> MemoryRender | None:
        """The memory of one call. The timeline is merged to its target (sized by the larger
        reference allowance, so merges recur call after call); when the newest unit is big, its
        oldest records make room for recovery (per-call renders; recovered units stay shown);
        to fit the allowance it is merged further, and hidden only when even that cannot fit.
        Room recovery leaves unused goes back to the timeline, so the memory uses its allowance."""
        tk = self.tokenizer
        index = space.index
        wrapper = memory_wrapper_tokens(tk)
        a_mem = allowance - wrapper
        if a_mem <= 0:
            return None
        q_vec, excerpt_query, piece_query = self._queries(cfg, layout, window_units, query)
        size_mem = size_allowance - wrapper
        auto = None
        if cfg.mode == "auto":
            question = cfg.history == "reader" or bool(layout.current)
            auto = auto_plan(notes, index, cfg, tk, a_mem, size_mem, allowance, q_vec, excerpt_query, piece_query,
                             question, "" if question else self._focus(cfg, window_units, query), stable)
            target, room_for, recover = auto.target, auto.room_for, auto.recover
        elif cfg.mode == "unit":
            cands = candidates(q_vec, notes, index, cfg, piece_query) if cfg.recovery else []
            focus = self._focus(cfg, window_units, query) if cfg.history == "agent" and not layout.current else ""
            if cands and focus and not cfg.random_candidates:  # what was asked: its best match first
                cands = focus_first(cands, notes, index, index.bm25.query_terms(focus, cfg.query_terms))
            d = sum(max(0, n.raw_tokens - n.record_tokens) for n in (notes[c.pos] for c in cands))
            target = max(cfg.timeline_share * size_mem, size_mem - d)
            # the newest unit is big: the oldest records make room for recovery, this call only
            # (a recovered unit whose record is hidden is shown after the mark). A stable
            # request keeps its trace: it only hides what cannot fit.
            room_for = max(cfg.timeline_share * a_mem, a_mem - d) if a_mem < size_mem and not stable else None
            ranges = [index.unit_docs.get(notes[c.pos].unit_key, range(0)) for c in cands]
            scores = excerpt_scores(index, ranges, excerpt_query, q_vec, cfg)

            def recover(timeline: Timeline) -> MemoryRender:
                return unit_recovery(notes, timeline, cands, a_mem - timeline.total, allowance, index, cfg,
                                     tk, scores, in_place_detail=not stable)
        else:
            target = cfg.timeline_share * size_mem
            room_for = cfg.timeline_share * a_mem if a_mem < size_mem else None

            def recover(timeline: Timeline) -> MemoryRender:
                room = a_mem - timeline.total
                return piece_recovery(notes, timeline, piece_query, q_vec, room, allowance, index, tk, cfg) \
                    if cfg.recovery else \
                    unit_recovery(notes, timeline, [], room, allowance, index, cfg, tk, np.zeros(0))
        timeline = self._fitted_timeline(space, cfg, notes, target, a_mem, room_for)
        mem = recover(timeline)
        calls = timeline.llm_calls
        unused = allowance - mem.tokens
        if unused > 0 and timeline.total < a_mem and (timeline.hidden_until or any(it.level for it in timeline.items)):
            # Recovery left room: give it back to the trace (fewer hidden or merged records), recover again.
            wider = self._fitted_timeline(space, cfg, notes, target, a_mem, timeline.total + unused) \
                if timeline.hidden_until else self._fitted_timeline(space, cfg, notes, timeline.total + unused, a_mem)
            calls += wider.llm_calls
            if wider.total > timeline.total:
                again = recover(wider)
                if mem.tokens <= again.tokens <= allowance:
                    mem = again
        mem.llm_calls += calls
        if auto is not None:
            mem.auto = {**auto.report, **(mem.auto or {})}  # what this recovery showed, if it says
        return mem

    def _fitted_timeline(self, space: _Namespace, cfg: FlexAMemConfig, notes: Sequence[Note], target: float,
                         a_mem: int, room_for: float | None = None) -> Timeline:
        """The timeline merged to ``target``; with ``room_for`` its oldest items hidden down to it
        (a big newest unit); then merged, not hidden, to fit ``a_mem``: the oldest items are
        hidden for room only if the fully merged timeline is still over it."""
        timeline = self._timeline(space, cfg, notes, target)
        if room_for is not None:
            timeline.hide_down_to(room_for, keep=1)
        if timeline.total > a_mem:
            timeline = self._timeline(space, cfg, notes, a_mem)
            timeline.hide_down_to(a_mem)
        return timeline

    # ------------------------------------------------------------------ forgetting
    def forget(self, namespace: str, unit_key: str | None = None) -> int:
        """Delete one unit (and everything derived from it) or a whole namespace.

        Needs a store with ``delete_unit`` / ``delete_namespace`` (every bundled backend
        has them); the namespace's cached index is dropped so the next call rebuilds it.
        """
        delete_unit = getattr(self.store, "delete_unit", None)
        delete_namespace = getattr(self.store, "delete_namespace", None)
        if delete_unit is None or delete_namespace is None:
            raise TypeError(f"{type(self.store).__name__} does not support forgetting")
        with self._lock:
            check_namespace(namespace)
            self._spaces.pop(namespace, None)
            if unit_key is not None:
                return int(bool(delete_unit(namespace, unit_key)))
            return int(delete_namespace(namespace))
