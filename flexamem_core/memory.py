"""``FlexAMem``: ingest a history once, render a fresh memory for every call.

The facade ties the pipeline together: the history is split into the fixed prompt and
units (``units``), complete units are written once as notes (``notes``), and each call
renders the timeline (``timeline``) with recovered detail (``recovery``) inside the
allowance left by the prompt and the recent window (``render``).
"""

from __future__ import annotations

import asyncio
import gc
import operator
import threading
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bm25 import content_words
from .config import FlexAMemConfig
from .embeddings import default_embedder, normalize
from .index import NamespaceIndex
from .messages import Message, as_messages, quick_fingerprint
from .notes import NoteWriter
from .prompt_cache import common_prefix_tokens
from .protocols import Embedder, RecordWriter, Store, Tokenizer
from .recovery import (
    MEMORY_CLOSE,
    MEMORY_INTRO,
    MEMORY_OPEN,
    MemoryRender,
    candidates,
    piece_recovery,
    unit_recovery,
)
from .render import (
    PER_MESSAGE,
    BudgetError,
    Layout,
    Rendered,
    count_messages,
    exceeds,
    fit_messages,
    memory_message,
    no_inner_system,
    recent_window,
    repair_pairing,
    split_layout,
)
from .schema import Note, Unit
from .stable import SentRequest, append_new, extend_memory, stable_budget
from .stores import InMemoryStore, check_namespace
from .timeline import Timeline, TimelineLevels
from .tokens import default_tokenizer
from .units import PackedUnit, next_step, pack_units, split_steps, to_unit, unit_key
from .writers import RuleRecordWriter


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
    chain: list[tuple[Unit, tuple[Any, ...]]] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    chain_messages: list[Message] = field(default_factory=list)
    user_units: list[int] = field(default_factory=list)
    sent: SentRequest | None = None

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
        self.config = FlexAMemConfig(**{**base.model_dump(), **settings}) if settings else base
        self.store: Store = store if store is not None else InMemoryStore()
        self.tokenizer: Tokenizer = tokenizer or default_tokenizer()
        self._embedder = embedder
        self.writer: RecordWriter = writer or RuleRecordWriter(self.config.record_words,
                                                               self.config.merged_record_words)
        self._spaces: dict[str, _Namespace] = {}
        self._lock = threading.RLock()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    # ------------------------------------------------------------------ state
    def _space(self, namespace: str) -> _Namespace:
        check_namespace(namespace)
        space = self._spaces.get(namespace)
        if space is None:
            index = NamespaceIndex(self.store, namespace, self.config.bm25_k1, self.config.bm25_b)
            if index.notes:
                # The index just loaded is long-lived: keep the cyclic collector from walking it
                # again on every full collection (seconds at 10,000 units, inside a render).
                gc.freeze()
            children: dict[str | None, list[str]] = {}
            for key, parent in self.store.parents(namespace).items():
                children.setdefault(parent, []).append(key)
            space = self._spaces[namespace] = _Namespace(index, children)
        return space

    def count_messages(self, messages: Sequence[Message | Mapping[str, Any]], extra_tokens: int = 0) -> int:
        """Exact token count of a request as FlexA-Mem budgets it."""
        return count_messages(as_messages(messages), self.tokenizer, extra_tokens)

    # ------------------------------------------------------------------ ingestion
    def _sync(self, space: _Namespace, namespace: str, body: Sequence[Message], final: bool,
              progress: Any = None) -> _Synced:
        """Match the body against the stored chain, pack the rest, write complete units.

        The usual call brings the same message objects as the last one plus new ones: one
        identity pass (in C) confirms the whole chain, and only the new messages are packed.
        """
        kind = self.config.history
        flat = space.chain_messages
        if flat and len(body) >= len(flat) and body[len(flat) - 1] is flat[-1] and \
                all(map(operator.is_, body, flat)):
            matched, i = list(space.chain), len(flat)  # the same objects as last call: all units still match
        else:
            matched, i = [], 0
            for unit, fps in space.chain:
                n = len(unit.messages)
                if i + n <= len(body) and all(a is b or quick_fingerprint(a) == fp
                                              for a, b, fp in zip(body[i:i + n], unit.messages, fps)):
                    matched.append((unit, fps))
                    i += n
                else:
                    break
        kept = len(matched)
        parent = matched[-1][0].key if matched else None
        while True:  # units stored earlier (another process, or before a restart)
            found = None
            for key in reversed(space.children.get(parent, [])):
                stored = self.store.get_unit(namespace, key)
                n = len(stored.messages)
                if i + n <= len(body) and stored.kind == kind and \
                        unit_key(body[i:i + n], kind, parent) == key:
                    found = stored
                    break
            if found is None:
                break
            matched.append((found, tuple(quick_fingerprint(m) for m in body[i:i + len(found.messages)])))
            i += len(found.messages)
            parent = found.key
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
        written = NoteWriter(self.config, self.tokenizer, self.embedder, self.writer).write(
            self.store, space.index, new_units, progress) if new_units else 0
        for unit in new_units:
            siblings = space.children.setdefault(unit.parent, [])
            if unit.key not in siblings:
                siblings.append(unit.key)
            matched.append((unit, tuple(quick_fingerprint(m) for m in unit.messages)))
        space.set_chain(matched, kept, body)
        return _Synced(space.units, tail, written)

    def ingest(self, history: Sequence[Message | Mapping[str, Any]], *, namespace: str = "default",
               final: bool = False, progress: Any = None) -> int:
        """Write the complete units of ``history`` not yet stored; returns how many were new.

        ``final=True`` also writes the last, still open unit (a finished conversation).
        Idempotent: the same history, or the history plus new messages, writes only new units.
        """
        msgs = as_messages(history)
        with self._lock:
            space = self._space(namespace)
            layout = split_layout(msgs, self.config.history)
            body = list(layout.body) + (list(layout.current) if final else [])
            synced = self._sync(space, namespace, body, final, progress)
            return synced.written

    # ------------------------------------------------------------------ rendering
    def render(self, history: Sequence[Message | Mapping[str, Any]], *, namespace: str = "default",
               budget: int | None = None, query: str | None = None, extra_tokens: int = 0) -> Rendered:
        """Messages to send for this call: the history itself when it fits, else the
        fixed prompt, one memory message and the recent window. Never mutates ``history``.

        With ``cache_stable`` (the agent default) consecutive calls of a namespace keep a
        stable request prefix: see :mod:`flexamem_core.stable` for the rule.
        """
        msgs = as_messages(history)
        cfg = self.config if budget is None else self.config.with_budget(budget)
        if extra_tokens < 0:
            raise ValueError("extra_tokens must be >= 0")
        stable = cfg.cache_stable and cfg.history == "agent"
        with self._lock:
            space = self._space(namespace)
            layout = split_layout(msgs, cfg.history)
            previous = space.sent if stable else None
            grown = previous is not None and previous.continues(msgs, cfg.budget, extra_tokens, query)
            if grown:
                assert previous is not None
                rendered = append_new(previous, msgs, cfg, self.tokenizer)
                if rendered is not None:
                    self._sync(space, namespace, layout.body, False)
                    space.sent = previous.after(msgs, rendered)
                    return rendered
            if not exceeds(msgs, self.tokenizer, cfg.effective_budget, extra_tokens):
                self._sync(space, namespace, layout.body, False)
                total = count_messages(msgs, self.tokenizer, extra_tokens)
                rendered = Rendered(list(msgs), None, total,
                                    {"passthrough": True, "budget": cfg.budget, "total_tokens": total},
                                    passthrough=True)
            elif not stable:
                rendered = self._render(space, namespace, cfg, layout, query, extra_tokens)
            else:
                extended = None
                if grown:
                    assert previous is not None
                    synced = self._sync(space, namespace, layout.body, False)
                    extended = extend_memory(self, space, previous, layout, cfg, extra_tokens, synced)
                # A thread followed call by call leaves room to append; a first render (a
                # one-off call, or the first after a restart) has no previous request to keep.
                rendered = extended or (
                    self._render_stable(space, namespace, cfg, layout, query, extra_tokens) if previous
                    else self._render(space, namespace, cfg, layout, query, extra_tokens, stable=True))
            if stable:
                prefix = common_prefix_tokens(previous.messages, rendered.messages, self.tokenizer) \
                    if previous is not None else 0
                rendered.report["cache"] = {"step": "render", **rendered.report.get("cache", {}), "appended": False,
                                            "reused_prefix_tokens": min(prefix, rendered.tokens)}
                space.sent = SentRequest.of(cfg.budget, extra_tokens, query, msgs, rendered)
            return rendered

    def _render_stable(self, space: _Namespace, namespace: str, cfg: FlexAMemConfig, layout: Layout,
                       query: str | None, extra_tokens: int) -> Rendered:
        """A fresh render for ``stable_target`` of the budget (room for the next calls to
        append); at the full budget instead if the newest step would have to be cut."""
        fixed = layout.fixed
        low = cfg.with_budget(min(cfg.budget, stable_budget(cfg, count_messages(fixed, self.tokenizer, extra_tokens))))
        try:
            rendered = self._render(space, namespace, low, layout, query, extra_tokens, stable=True)
        except BudgetError:
            rendered = None
        if rendered is None or rendered.report["newest_unit_cut_messages"] or \
                rendered.report["newest_unit_dropped_steps"]:
            return self._render(space, namespace, cfg, layout, query, extra_tokens, stable=True)
        rendered.report.update(budget=cfg.budget, effective_budget=cfg.effective_budget,
                               render_budget=low.budget)
        return rendered

    async def arender(self, history: Sequence[Message | Mapping[str, Any]], **kwargs: Any) -> Rendered:
        """Async twin of :meth:`render` (runs in a worker thread)."""
        return await asyncio.to_thread(self.render, history, **kwargs)

    def render_question(self, question: str, *, namespace: str = "default", budget: int | None = None,
                        system_prompt: str = "") -> Rendered:
        """Reader use: render a namespace's stored history for a question."""
        msgs: list[Message] = [Message(role="system", content=system_prompt)] if system_prompt else []
        msgs.append(Message(role="user", content=question))
        cfg = self.config if budget is None else self.config.with_budget(budget)
        with self._lock:
            space = self._space(namespace)
            units = self._stored_chain(space, namespace)
            layout = Layout(msgs[0] if system_prompt else None, (), (), (msgs[-1],))
            return self._render(space, namespace, cfg, layout, None, 0, units=units)

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
                stable: bool = False) -> Rendered:
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
                f"({fixed_tokens} tokens: system prompt, task or current turn, tool schemas)")
        # Recent window (agents): the longest run of newest units within window_share * B.
        window_units: list[Unit | PackedUnit] = []
        if kind == "agent":
            all_units: list[Unit | PackedUnit] = [*units, *([tail] if tail else [])]
            n_win = recent_window(_newest_sizes(all_units, tk, cfg.window_share * cfg.budget),
                                  cfg.window_share * cfg.budget) if all_units else 0
            window_units = all_units[len(all_units) - n_win:]
            old = [u for u in all_units[: len(all_units) - n_win] if isinstance(u, Unit)]
        else:
            old = list(units)
            if tail is not None:
                tail_tokens = count_messages(tail.messages, tk) - 3
                if tail_tokens <= cfg.window_share * cfg.budget:
                    window_units = [tail]
                else:
                    final_sync = self._sync(space, namespace, layout.body, True)
                    old = list(final_sync.units)
        n_window = sum(len(u.messages) for u in window_units)
        # The window is the body's newest messages: send the caller's own objects.
        window_src = list(layout.body[len(layout.body) - n_window:]) if kind == "agent" and \
            n_window <= len(layout.body) else [m for u in window_units for m in u.messages]
        window_msgs, n_repairs = repair_pairing(no_inner_system(window_src))
        pinned = self._pinned_turn(space, len(old), window_msgs)
        # The newest unit alone over the budget: cut its largest outputs (marked), keep pairing.
        room_for_window = b_bar - fixed_tokens - (count_messages(pinned, tk) - 3 if pinned else 0)
        n_cut = 0
        n_dropped = 0
        if window_msgs and count_messages(window_msgs, tk) - 3 > room_for_window:
            window_msgs, n_cut, n_dropped = self._fit_window(window_msgs, room_for_window)
        head = fixed
        tail_msgs = [*pinned, *window_msgs, *layout.current]
        base = count_messages(head + tail_msgs, tk, extra_tokens)
        allowance = b_bar - base - PER_MESSAGE
        ref_allowance = b_bar - fixed_tokens - int(cfg.window_share * cfg.budget) - PER_MESSAGE \
            if kind == "agent" else allowance
        index = space.index
        notes = index.notes_of([u.key for u in old])
        mem = self._memory(space, cfg, notes, allowance, max(allowance, ref_allowance), layout,
                           window_units, query, stable) if notes else None
        messages = list(head)
        if mem is not None and mem.tokens <= allowance:
            messages.append(memory_message(mem.text))
        messages.extend(tail_msgs)
        tokens = count_messages(messages, tk, extra_tokens)
        if tokens > b_bar:
            raise BudgetError(
                f"budget {cfg.budget} (usable {b_bar}) cannot hold the fixed prompt and the newest "
                f"step even after cutting its outputs ({tokens} tokens)")
        report: dict[str, Any] = {
            "passthrough": False, "mode": cfg.mode, "history": kind, "budget": cfg.budget,
            "effective_budget": b_bar, "total_tokens": tokens, "prompt_tokens": fixed_tokens,
            "window_tokens": base - fixed_tokens + 3 if tail_msgs else 0,
            "window_units": len(window_units), "old_units": len(old), "newest_unit_cut_messages": n_cut,
            "window_messages": len(window_msgs) if not (n_cut or n_dropped or n_repairs) else None,
            "pairing_repairs": n_repairs, "newest_unit_dropped_steps": n_dropped,
            "allowance": allowance, "reference_allowance": ref_allowance,
            "memory_tokens": mem.tokens if mem else 0,
            "spent": mem.spent if mem else {"timeline": 0, "raw": 0, "excerpt": 0, "pieces": 0},
            "units": mem.units if mem else [], "pieces": mem.pieces if mem else [],
            "llm_calls": mem.llm_calls if mem else 0,
        }
        return Rendered(messages, mem.text if mem and mem.tokens <= allowance else None, tokens, report)

    def _fit_window(self, window: list[Message], room: int) -> tuple[list[Message], int, int]:
        """The newest unit alone over the budget: cut its largest outputs (marked); if that is
        not enough, leave out its oldest whole steps (never the newest) for this call."""
        steps = split_steps(window)
        dropped = 0
        while True:
            msgs = [m for s in steps for m in s]
            fitted, n_cut = fit_messages(msgs, room, self.tokenizer)
            if count_messages(fitted, self.tokenizer) - 3 <= room or len(steps) == 1:
                return fitted, n_cut, dropped
            steps = steps[1:]
            dropped += 1

    def _pinned_turn(self, space: _Namespace, n_old: int, window: Sequence[Message]) -> list[Message]:
        """Agents: the newest user turn stays visible even when its unit left the window."""
        if self.config.history != "agent" or not self.config.pin_user_turn or not n_old:
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
        that BM25 scores excerpts and pieces by. Agents: the task and the newest unit."""
        task_text = "\n".join(m.text for m in layout.task)
        newest = window_units[-1].raw if window_units else ""
        question = "\n".join(m.text for m in layout.current)
        extra = query or ""
        if cfg.history == "agent" and not question:
            q_vec = normalize(sum(self.embedder.embed([t for t in (task_text, newest, extra) if t]),
                                  np.zeros(self.embedder.dim, dtype=np.float32)))
            return q_vec, "\n".join(t for t in (newest, extra) if t), \
                "\n".join(t for t in (task_text, newest, extra) if t)
        q_text = "\n".join(t for t in (question, extra) if t) or task_text
        return self.embedder.embed([q_text])[0], q_text, q_text

    def _memory(self, space: _Namespace, cfg: FlexAMemConfig, notes: list[Note], allowance: int,
                size_allowance: int, layout: Layout, window_units: Sequence[Unit | PackedUnit],
                query: str | None, stable: bool = False) -> MemoryRender | None:
        tk = self.tokenizer
        index = space.index
        wrapper = tk.count(f"{MEMORY_OPEN}\n{MEMORY_INTRO}\n{MEMORY_CLOSE}") + 16
        a_mem = allowance - wrapper
        if a_mem <= 0:
            return None
        q_vec, excerpt_query, piece_query = self._queries(cfg, layout, window_units, query)
        size_mem = size_allowance - wrapper
        if cfg.mode == "unit":
            cands = candidates(q_vec, notes, index, cfg, piece_query) if cfg.recovery else []
            d = sum(max(0, n.raw_tokens - n.record_tokens) for n in (notes[c.pos] for c in cands))
            timeline = self._timeline(space, cfg, notes, max(cfg.timeline_share * size_mem, size_mem - d))
            if a_mem < size_mem and not stable:  # the newest unit is big: hide the oldest records,
                # this call only (never all of them for the share: the allowance check below does
                # that if need be). A stable request keeps its trace: it only hides what cannot fit.
                timeline.hide_down_to(max(cfg.timeline_share * a_mem, a_mem - d), keep=1)
            timeline.hide_down_to(a_mem)
            ranges = [index.unit_docs.get(notes[c.pos].unit_key, range(0)) for c in cands]
            scores = index.bm25.scores_in(content_words(excerpt_query), ranges)
            mem = unit_recovery(notes, timeline, cands, a_mem - timeline.total, allowance, index, cfg,
                                tk, scores, in_place_detail=not stable)
        else:
            timeline = self._timeline(space, cfg, notes, cfg.timeline_share * size_mem)
            if a_mem < size_mem:
                timeline.hide_down_to(cfg.timeline_share * a_mem, keep=1)
            timeline.hide_down_to(a_mem)
            room = a_mem - timeline.total
            mem = piece_recovery(notes, timeline, piece_query, q_vec, room, allowance, index, tk) \
                if cfg.recovery else \
                unit_recovery(notes, timeline, [], room, allowance, index, cfg, tk, np.zeros(0))
        mem.llm_calls += timeline.llm_calls
        return mem

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
