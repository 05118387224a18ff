"""The prompt-cache-stable request (``cache_stable``, the agent default).

Providers bill a request prefix they have cached at about a tenth of the price, so a
request that changes near its start on every call is expensive. While a thread's history
only grows, each call is answered with the cheapest of four requests that fit ``B_bar``:

1. **append**: the previous request with the new messages appended verbatim (the whole
   previous request is a cached prefix);
2. **extend**: the previous memory text kept as it is, with the records of the units that
   left the recent window added at its end, then the newest units verbatim (the fixed
   prompt and the previous memory are a cached prefix). Everything after the previous
   memory is sent again whichever units leave, so by default (``stable_extend="evict_all"``)
   every unit but the newest leaves while the memory stays within the allowance the paper's
   render would give it: the request shrinks the most and the most calls append before the
   next extension; ``"to_target"`` keeps the longest run of newest units that keeps the
   request within the fixed prompt plus ``stable_target`` of the rest of ``B_bar``;
3. **compact**: where the memory can grow no more, its leading record lines kept as they were
   sent and the units after them merged into a timeline of their own (:mod:`.compact`);
4. **render**: a fresh render (the paper's rule) for that same share of the budget, when
   none of these fits or the history changed other than by growing.

The first render after the history was sent whole (``stable_head``, on by default) keeps the
oldest old units as their messages right after the fixed prompt, where every earlier call
sent them: that **head** stays a cached prefix instead of being sent again inside the memory,
and it shows those units in full (:mod:`flexamem_core.render.head`); extensions keep it, the
next render drops it (kept for good it would take room from every later memory).

The paper's render on every call stays available with ``cache_stable=False``. The report
of every call says which of the four it was and how many tokens of the previous request
it reuses as a prefix.

The previous request is kept in the store where it has the ``RequestStates`` capability
(:mod:`.persisted`), so a thread continues the same prefix whichever process serves a call.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace

from ..model.messages import Message
from ..model.protocols import RequestStates, Store, Tokenizer
from ..render.outcome import CacheStep, Outcome
from ..render.pipeline import Call, Frame, Pipeline, render_fitted
from ..render.state import NamespaceState
from ..request.budget import BudgetError
from ..request.counting import count_messages
from ..request.layout import Layout, split_layout
from . import persisted
from .extend import Extender
from .prefix import common_prefix_tokens
from .sent import SentRequest, append_new
from .target import stable_budget


class StableRequests:
    """Answers each call of a thread with the cheapest of append, extend and render (see the
    module docstring), remembering each namespace's previous request."""

    def __init__(self, pipeline: Pipeline, extender: Extender, tokenizer: Tokenizer, store: Store) -> None:
        self.pipeline, self.extender, self.tokenizer = pipeline, extender, tokenizer
        #: Where requests are saved for other processes, if the store can keep them.
        self.saved = store if isinstance(store, RequestStates) else None
        #: Namespace -> (its state when the request was sent, the request, its saved form): a
        #: state that was dropped and loaded again (the store changed, or the namespace was
        #: forgotten) has none.
        self._sent: dict[str, tuple[weakref.ref[NamespaceState], SentRequest, bytes | None]] = {}

    def previous(self, namespace: str, state: NamespaceState, msgs: list[Message]) -> SentRequest | None:
        """The previous request of the namespace: the one this process sent, if its state is
        still the one it was sent from and the store holds no other; else the one the store
        holds, if ``msgs`` continues its history."""
        entry = self._sent.get(namespace)
        mine = entry[1] if entry is not None and entry[0]() is state else None
        if self.saved is None:
            return mine
        data = self.saved.get_request_state(namespace)
        if data is None:
            return None
        if entry is not None and mine is not None and data == entry[2]:
            return mine
        return persisted.decode(data, msgs, state.digests.at)

    def render(self, state: NamespaceState, namespace: str, msgs: list[Message], grew: bool, call: Call) -> Outcome:
        """The request of one call over ``msgs`` (``grew``: the namespace's copy only grew)."""
        cfg = call.cfg
        previous = self.previous(namespace, state, msgs)
        # The previous request's history is the namespace's copy, which only grew since: no
        # pass over the history is needed to know this call continues it.
        grown = previous is not None and (
            (grew and previous.source is msgs and previous.same_call(cfg.budget, call.extra_tokens, call.query))
            or previous.continues(msgs, cfg.budget, call.extra_tokens, call.query))
        if grown:
            assert previous is not None
            appended = append_new(previous, msgs, cfg, self.tokenizer)
            if appended is not None:
                body = split_layout(msgs, cfg.history, shared=grew, task=cfg.keep_task).body
                self.pipeline.sync.sync(state, namespace, body, cfg)
                self._keep(namespace, state, previous.after(msgs, appended))
                return appended
        layout = split_layout(msgs, cfg.history, shared=grew, task=cfg.keep_task)
        outcome = self.pipeline.pass_through(state, namespace, msgs, layout, call)
        if outcome is None:
            outcome = render_fitted(layout, call, namespace, self.tokenizer,
                                    lambda fitted: self._fresh(state, namespace, fitted, call, previous, grown))
        prefix = common_prefix_tokens(previous.messages, outcome.messages, self.tokenizer) \
            if previous is not None else 0
        step = outcome.report.cache
        outcome = outcome.with_report(cache=CacheStep(
            step.step if step else "render", False, reused_prefix_tokens=min(prefix, outcome.tokens),
            extended_units=step.extended_units if step else None,
            recovered_units=step.recovered_units if step else None,
            kept_memory_chars=step.kept_memory_chars if step else None))
        self._keep(namespace, state, SentRequest.of(cfg.budget, call.extra_tokens, call.query, msgs, outcome))
        return outcome

    def _keep(self, namespace: str, state: NamespaceState, sent: SentRequest) -> None:
        data = None
        if self.saved is not None:
            data = persisted.encode(sent, state.digests.at(sent.source, sent.length))
            self.saved.put_request_state(namespace, data)
        self._sent[namespace] = (weakref.ref(state), sent, data)

    def _fresh(self, state: NamespaceState, namespace: str, layout: Layout, call: Call,
               previous: SentRequest | None, grown: bool) -> Outcome:
        """Extend the previous memory where the history only grew; else render. A thread followed
        call by call leaves room to append; a first render (a one-off call, or the first after a
        restart) has no previous request to keep. The first render after the history was sent
        whole keeps its oldest units where they were sent (``stable_head``)."""
        cfg = call.cfg
        if grown:
            assert previous is not None
            synced = self.pipeline.sync.sync(state, namespace, layout.body, cfg)
            extended = self.extender.extend(state, previous, layout, cfg, call.extra_tokens, synced)
            if extended is not None:
                return extended
        stable = replace(call, stable=True, head=cfg.tuning.stable_head and previous is not None and
                         previous.outcome.passthrough)
        if previous is None:
            return self.pipeline.render(state, namespace, layout, stable)
        return self._render_for_target(state, namespace, layout, stable)

    def _render_for_target(self, state: NamespaceState, namespace: str, layout: Layout, call: Call) -> Outcome:
        """A fresh render for ``stable_target`` of the budget (room for the next calls to append);
        at the full budget instead if the newest step would have to be cut.

        The budget is chosen from the request's frame (the fixed prompt, head and window it
        leaves room for); the memory is recalled once, at the budget chosen."""
        cfg = call.cfg
        low = call.at(cfg.with_budget(min(cfg.budget, stable_budget(
            cfg, count_messages(layout.fixed, self.tokenizer, call.extra_tokens)))))
        try:
            framed: _Framed | None = self._framed(state, namespace, layout, low)
        except BudgetError:
            framed = None
        raised = False
        if framed is not None and framed.old_units:
            # A big newest unit can take nearly all of the reduced budget: the memory keeps
            # ``stable_target`` of the allowance the whole budget gives it, the rest is for appending.
            allowance = framed.frame.allowance
            want = math.ceil(cfg.tuning.stable_target * (allowance + cfg.effective_budget -
                                                         low.cfg.effective_budget))
            if allowance < want:
                mid = low.cfg.effective_budget + want - allowance
                low = call.at(cfg.with_budget(min(cfg.budget, math.ceil(mid / cfg.tuning.safety_margin))))
                framed, raised = self._framed(state, namespace, layout, low), True
        if framed is None or framed.frame.cut or framed.frame.dropped:
            return self.pipeline.render(state, namespace, layout, call)
        try:
            outcome = framed.finished(self.pipeline, state, layout)
        except BudgetError:
            if raised:
                raise  # the raised budget cannot hold it either
            return self.pipeline.render(state, namespace, layout, call)
        return outcome.with_report(budget=cfg.budget, effective_budget=cfg.effective_budget,
                                   render_budget=low.cfg.budget)

    def _framed(self, state: NamespaceState, namespace: str, layout: Layout, call: Call) -> _Framed:
        """The frame of a render at ``call``'s budget. A head is kept only where the whole render
        keeps it (the newest step whole, the memory in place), so with a head it is rendered now."""
        frame = self.pipeline.frame(state, namespace, layout, call, None)
        if not call.head:
            return _Framed(call, frame)
        done = self.pipeline.finish(state, layout, call, frame)
        if isinstance(done, Call):
            return _Framed(done, self.pipeline.frame(state, namespace, layout, done, None))
        return _Framed(call, frame, done)


@dataclass
class _Framed:
    """A framed request at one budget, finished already where deciding its head needed it."""

    call: Call
    frame: Frame
    outcome: Outcome | None = None

    @property
    def old_units(self) -> int:
        return len(self.frame.old) + len(self.frame.head_units)

    def finished(self, pipeline: Pipeline, state: NamespaceState, layout: Layout) -> Outcome:
        if self.outcome is not None:
            return self.outcome
        done = pipeline.finish(state, layout, self.call, self.frame)
        assert isinstance(done, Outcome)  # no head to drop, no chat window: nothing else to try
        return done
