"""``FlexAMem``: ingest a history once, render a fresh memory for every call.

The facade holds the parts and delegates: a namespace's state (:mod:`.render.state`), the
sync that writes new units (:mod:`.render.sync`), the render pipeline
(:mod:`.render.pipeline`) with the recovery strategy the config names
(:mod:`.recall.strategies`), and the cache-stable request (:mod:`.cache.stable`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .cache.extend import Extender
from .cache.stable import StableRequests
from .config import FlexAMemConfig
from .index.embeddings import default_embedder
from .index.warm import warm_embedder, warm_in_background
from .logs import logged_render
from .model.messages import Message, MessageError, as_messages
from .model.protocols import Embedder, RecordWriter, Store, Tokenizer
from .recall.compose import MemoryComposer
from .recall.queries import QueryMaker
from .recall.strategies import strategy_class
from .render.outcome import Outcome
from .render.pipeline import Call, Pipeline, render_fitted
from .render.state import Namespaces, NamespaceState
from .render.sync import Sync
from .request.budget import check_extra_tokens
from .request.counting import count_messages
from .request.layout import Layout, split_layout
from .request.properties import step_status
from .request.rendered import Rendered
from .request.tokens import default_tokenizer
from .stores import InMemoryStore
from .write.writers import RuleRecordWriter


class FlexAMem:
    """Write-once memory rendered per call: :meth:`ingest` writes a history's complete units,
    :meth:`render` returns the request for a model call within its budget, :meth:`render_question`
    renders a stored history for a question, :meth:`forget` deletes. One instance serves any
    number of namespaces (threads, tasks, users) and may be shared between threads."""

    def __init__(self, config: FlexAMemConfig | None = None, *, store: Store | None = None,
                 tokenizer: Tokenizer | None = None, embedder: Embedder | None = None,
                 writer: RecordWriter | None = None, **settings: Any) -> None:
        base = config or FlexAMemConfig()
        self.config = base.updated(**settings) if settings else base
        strategy = strategy_class(self.config.mode)()
        self.store: Store = store if store is not None else InMemoryStore()
        self.tokenizer: Tokenizer = tokenizer or default_tokenizer()
        self._embedder = embedder
        self.writer: RecordWriter = writer or RuleRecordWriter(self.config.tuning.record_words,
                                                               self.config.tuning.merged_record_words)
        self._lock = threading.RLock()
        self._namespaces = Namespaces(self.store, self.tokenizer, self.config.tuning.bm25_k1, self.config.tuning.bm25_b)
        self._sync = Sync(self._namespaces, self.tokenizer, lambda: self.embedder, self.writer)
        queries = self._queries = QueryMaker(lambda: self.embedder)
        self._pipeline = Pipeline(self._sync, MemoryComposer(strategy, self.writer, self.tokenizer), queries,
                                  self.tokenizer)
        extender = Extender(strategy, queries, self.tokenizer, self.writer)
        self._stable = StableRequests(self._pipeline, extender, self.tokenizer, self.store)
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

    def count_messages(self, messages: Sequence[Message | Mapping[str, Any]], extra_tokens: int = 0) -> int:
        """Exact token count of a request as FlexA-Mem budgets it."""
        return count_messages(as_messages(messages), self.tokenizer, extra_tokens)

    def state(self, namespace: str = "default") -> NamespaceState:
        """The namespace's process-local state (its index, the chain of units last matched),
        loaded from the store if this process has none: for tools and tests."""
        with self._lock:
            return self._namespaces.get(namespace)

    def ingest(self, history: Sequence[Message | Mapping[str, Any]], *, namespace: str = "default",
               final: bool = False, progress: Any = None) -> int:
        """Write the complete units of ``history`` not yet stored, with every vector; returns how
        many were new.

        ``final=True`` also writes the last, still open unit (a finished conversation).
        Idempotent: the same history, or the history plus new messages, writes only new units.
        ``progress``: a tqdm-like object advanced per unit written.
        """
        history = _as_history(history)
        with self._lock, self._namespaces.open(namespace) as state:
            # a write with no render to hurry: every vector now
            self._sync.notes.fill(state, namespace, self.config, wait=True)
            self._sync.pieces.fill(state, namespace, self.config)
            msgs, grew = state.accept(history)
            layout = split_layout(msgs, self.config.history, shared=grew, task=self.config.keep_task)
            body = [*layout.body, *layout.current] if final and layout.current else layout.body
            written = self._sync.sync(state, namespace, body, self.config, final, progress, defer=False).written
            self._sync.pieces.fill(state, namespace, self.config)
            self._sync.prefetch(state, self.config)
            return written

    @logged_render
    def render(self, history: Sequence[Message | Mapping[str, Any]], *, namespace: str = "default",
               budget: int | None = None, query: str | None = None, extra_tokens: int = 0) -> Rendered:
        """Messages to send for this call: the history itself when it fits, else the
        fixed prompt, one memory message and the recent window. Never mutates ``history``.

        ``query``: what this call asks, when the history does not say it (it ranks old detail);
        ``extra_tokens``: tokens the request carries outside the messages (tool schemas, a
        system prompt sent apart). With ``cache_stable`` (the agent default) consecutive calls
        of a namespace keep a stable request prefix (:mod:`flexamem_core.cache.stable`).
        """
        history = _as_history(history)
        call = self._call(budget, query, extra_tokens)
        cfg = call.cfg
        with self._lock, self._namespaces.open(namespace) as state:
            self._sync.notes.fill(state, namespace, cfg, wait=cfg.embeds_pieces)
            self._sync.pieces.fill(state, namespace, cfg)
            msgs, grew = state.accept(history)
            if cfg.cache_stable and cfg.history == "agent":
                outcome = self._stable.render(state, namespace, msgs, grew, call)
            else:
                outcome = self._render_call(state, namespace, msgs, grew, call)
            # while the host waits for its model: the next unit's notes, and an agent's task (its
            # layout's body is a view of the namespace's copy, so this costs no pass over the history)
            agent = cfg.history == "agent"
            task = split_layout(msgs, cfg.history, shared=grew, task=cfg.keep_task).task if agent else ()
            self._sync.prefetch(state, cfg, self._queries.task_input(cfg, task))
            return outcome.with_report(newest_step=step_status(outcome.messages, msgs, cfg.history)).rendered()

    def _render_call(self, state: NamespaceState, namespace: str, msgs: list[Message], grew: bool,
                     call: Call) -> Outcome:
        """The paper's render on every call: the history when it fits, else a fresh render."""
        layout = split_layout(msgs, call.cfg.history, shared=grew, task=call.cfg.keep_task)
        passed = self._pipeline.pass_through(state, namespace, msgs, layout, call)
        if passed is not None:
            return passed
        return render_fitted(layout, call, namespace, self.tokenizer,
                             lambda fitted: self._pipeline.render(state, namespace, fitted, call))

    @logged_render
    def render_question(self, question: str, *, namespace: str = "default", budget: int | None = None,
                        system_prompt: str = "") -> Rendered:
        """Reader use: render a namespace's stored history for a question (no recent window)."""
        for name, value in (("question", question), ("system_prompt", system_prompt)):
            if not isinstance(value, str):
                raise MessageError(f"{name} must be a string, not {type(value).__name__}")
        msgs: list[Message] = [Message(role="system", content=system_prompt)] if system_prompt else []
        msgs.append(Message(role="user", content=question))
        call = self._call(budget, None, 0)
        with self._lock, self._namespaces.open(namespace) as state:
            self._sync.notes.fill(state, namespace, call.cfg, wait=True)  # the stored chain, ranked by vector
            self._sync.pieces.fill(state, namespace, call.cfg)
            units = self._sync.stored_chain(state, namespace)
            layout = Layout(msgs[0] if system_prompt else None, (), (), (msgs[-1],))
            outcome = render_fitted(layout, call, namespace, self.tokenizer,
                                    lambda fitted: self._pipeline.render(state, namespace, fitted, call, units))
            return outcome.with_report(newest_step=step_status(outcome.messages, msgs, "reader")).rendered()

    def _call(self, budget: int | None, query: str | None, extra_tokens: int) -> Call:
        """A call's settings, checked before any state is touched."""
        extra_tokens = check_extra_tokens(extra_tokens)
        if query is not None and not isinstance(query, str):
            raise MessageError(f"query must be a string or None, not {type(query).__name__}")
        return Call(self.config if budget is None else self.config.with_budget(budget), query, extra_tokens)

    def forget(self, namespace: str, unit_key: str | None = None) -> int:
        """Delete one unit (and everything derived from it) or a whole namespace.

        Needs a store with ``delete_unit`` / ``delete_namespace`` (every bundled backend
        has them); the namespace's state is dropped so the next call rebuilds it.
        """
        delete_unit = getattr(self.store, "delete_unit", None)
        delete_namespace = getattr(self.store, "delete_namespace", None)
        if delete_unit is None or delete_namespace is None:
            raise TypeError(f"{type(self.store).__name__} does not support forgetting")
        with self._lock:
            self._namespaces.drop(namespace)
            if unit_key is not None:
                return int(bool(delete_unit(namespace, unit_key)))
            return int(delete_namespace(namespace))

    async def aingest(self, history: Sequence[Message | Mapping[str, Any]], **kwargs: Any) -> int:
        """Async twin of :meth:`ingest` (runs in a worker thread: embedding does not block the loop)."""
        return await asyncio.to_thread(self.ingest, history, **kwargs)

    async def arender(self, history: Sequence[Message | Mapping[str, Any]], **kwargs: Any) -> Rendered:
        """Async twin of :meth:`render` (runs in a worker thread)."""
        return await asyncio.to_thread(self.render, history, **kwargs)

    async def arender_question(self, question: str, **kwargs: Any) -> Rendered:
        """Async twin of :meth:`render_question` (runs in a worker thread)."""
        return await asyncio.to_thread(self.render_question, question, **kwargs)

    async def aforget(self, namespace: str, unit_key: str | None = None) -> int:
        """Async twin of :meth:`forget` (runs in a worker thread)."""
        return await asyncio.to_thread(self.forget, namespace, unit_key)


def _as_history(history: Sequence[Message | Mapping[str, Any]]) -> Sequence[Message | Mapping[str, Any]]:
    """A list as it is (the namespace's copy grows from it); a tuple or another iterable converted
    once, here, with a clear error for what is not a history, before any state is touched."""
    return history if type(history) is list else as_messages(history)
