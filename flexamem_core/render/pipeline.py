"""One render of one call, as a straight pipeline:

1. **sync**: the history matched against the stored chain, new complete units written;
2. **frame**: the fixed prompt, the recent window (and a head, a pinned turn), fitted to the
   budget; what is left is the memory's allowance;
3. **recall**: the memory composed within the allowance by the recovery strategy
   (:mod:`flexamem_core.recall`);
4. **assemble**: the messages in order, the message rules applied, counted as sent;
5. **report**: what was shown, at which resolution and why.

A render that cannot keep its head (the head would cost the newest step a cut, or the memory
its place) is made once more without one; a chat whose open unit does not fit even cut is
made once more with that unit among the old ones. Nothing else is tried twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..config import FlexAMemConfig
from ..logs import warn_once
from ..model.messages import Message
from ..model.protocols import Tokenizer
from ..model.schema import Unit
from ..recall.assembly import MemoryRender, memory_wrapper_tokens
from ..recall.compose import MemoryComposer
from ..recall.queries import QueryMaker
from ..recall.report import count_resolutions
from ..recall.strategies.base import RecallCall
from ..request.budget import BudgetError
from ..request.counting import PER_MESSAGE, count_messages, exceeds
from ..request.cuts import fit_fixed
from ..request.layout import Layout
from ..request.marker import memory_message
from ..request.parts import enforce_part
from ..request.properties import apply_properties, sendable
from ..write.units import PackedUnit
from .head import head_units, with_head
from .outcome import Outcome, Report
from .state import NamespaceState
from .sync import Sync
from .window import agent_window, fit_pinned_and_window, pinned_turn


@dataclass(frozen=True)
class Call:
    """One call's settings: the config at the call's budget, ``query=``, the tokens the host adds
    outside the messages, and how the request is laid out (``stable``: the cache-stable layout,
    trace kept and detail after it; ``head``: oldest units verbatim ahead of the memory;
    ``chat_window``: a chat's open unit stays its recent window)."""

    cfg: FlexAMemConfig
    query: str | None = None
    extra_tokens: int = 0
    stable: bool = False
    head: bool = False
    chat_window: bool = True

    def at(self, cfg: FlexAMemConfig) -> Call:
        return replace(self, cfg=cfg)


@dataclass
class Frame:
    """A request before its memory: what precedes and follows it, and the room it leaves."""

    kind: str
    window_units: list[Unit | PackedUnit]
    #: Old units the memory covers (after the head), and the head's units.
    old: list[Unit]
    head_units: list[Unit]
    #: Sent before the memory (the fixed prompt, the head) and after it (pinned turn, window, current turn).
    before: list[Message]
    after: list[Message]
    head_messages: int
    fixed_tokens: int
    base: int
    window_messages: int
    cut: int
    dropped: int
    pinned_cut: int
    repairs: int
    allowance: int
    reference_allowance: int


class Pipeline:
    """Renders calls of any namespace (see the module docstring)."""

    def __init__(self, sync: Sync, composer: MemoryComposer, queries: QueryMaker, tokenizer: Tokenizer) -> None:
        self.sync, self.composer, self.queries, self.tokenizer = sync, composer, queries, tokenizer

    def render(self, state: NamespaceState, namespace: str, layout: Layout, call: Call,
               units: list[Unit] | None = None) -> Outcome:
        """The request of one call over ``layout`` (``units``: a stored history, for a question)."""
        frame = self.frame(state, namespace, layout, call, units)
        done = self.finish(state, layout, call, frame)
        if isinstance(done, Call):
            done = self.finish(state, layout, done, self.frame(state, namespace, layout, done, units))
        assert isinstance(done, Outcome)
        return done

    def pass_through(self, state: NamespaceState, namespace: str, msgs: list[Message], layout: Layout,
                     call: Call) -> Outcome | None:
        """The history as it is, if it fits the budget (its units still written as they complete)."""
        if exceeds(msgs, self.tokenizer, call.cfg.effective_budget, call.extra_tokens):
            return None
        self.sync.sync(state, namespace, layout.body, call.cfg)
        return passthrough(msgs, call.cfg, self.tokenizer, call.extra_tokens)

    def finish(self, state: NamespaceState, layout: Layout, call: Call, frame: Frame) -> Outcome | Call:
        """Recall, assemble and report a framed request; a :class:`Call` to try instead where the
        request cannot keep its layout."""
        mem = self.recall(state, layout, call, frame)
        shown = mem is not None and mem.tokens <= frame.allowance
        messages = [*frame.before, *([memory_message(mem.text)] if shown else []), *frame.after]  # type: ignore[union-attr]
        final = apply_properties(messages)  # the parts obey the rules; this checks the whole
        messages = final.messages
        tokens = count_messages(messages, self.tokenizer, call.extra_tokens)
        b_bar = call.cfg.effective_budget
        if frame.head_units and (tokens > b_bar or frame.cut or frame.dropped or frame.pinned_cut or
                                 (frame.old and not shown)):
            return replace(call, head=False)  # the head may not cost the newest step a cut or the memory its place
        if tokens > b_bar and frame.kind == "reader" and call.chat_window and frame.window_units:
            return replace(call, chat_window=False)  # even cut, the chat's open unit does not fit: it joins the old
        if tokens > b_bar:
            raise BudgetError(
                f"budget {call.cfg.budget} (usable {b_bar}) cannot hold the fixed prompt and the newest "
                f"step even after cutting its outputs ({tokens} tokens)")
        report = self.report(state, call, frame, mem, messages, tokens, final.repairs)
        records = mem.records if shown else None  # type: ignore[union-attr]
        if records is not None:  # the memory's positions follow the head's units
            records = (records[0], records[1] + len(frame.head_units))
        return Outcome(messages, mem.text if shown else None, tokens, report, records)  # type: ignore[union-attr]

    def frame(self, state: NamespaceState, namespace: str, layout: Layout, call: Call,
              units: list[Unit] | None) -> Frame:
        """Sync, then the parts of the request around the memory, fitted to the budget."""
        cfg, tk = call.cfg, self.tokenizer
        b_bar = cfg.effective_budget
        kind = cfg.history if units is None else "reader"  # a stored history asked a question: no window
        tail = None
        if units is None:
            synced = self.sync.sync(state, namespace, layout.body, cfg)
            units, tail = synced.units, synced.tail
        fixed_tokens = count_messages(layout.fixed + list(layout.current), tk, call.extra_tokens)
        if fixed_tokens > b_bar:
            raise BudgetError(
                f"budget {cfg.budget} (usable {b_bar}) is too small for the fixed prompt "
                f"({fixed_tokens} tokens: system prompt, tool schemas, and the task or current turn "
                "cut down to its marks)")
        window_units, old = self._window(state, namespace, layout, call, kind, units, tail)
        n_window = sum(len(u.messages) for u in window_units)
        body = layout.body
        head_list: list[Unit] = []
        if call.head and kind == "agent" and len(old) > 1:
            base = count_messages([*layout.fixed, *body[len(body) - n_window:]], tk, call.extra_tokens)
            head_list = head_units(old, state.index, tk, b_bar - base - PER_MESSAGE)
            old = old[len(head_list):]
        # The window is the body's newest messages: send the caller's own objects.
        window = enforce_part(list(body[len(body) - n_window:]) if kind == "agent" and n_window <= len(body)
                              else [m for u in window_units for m in u.messages])
        current = enforce_part(layout.current)
        head_msgs = [sendable(m) for m in body[:sum(len(u.messages) for u in head_list)]]
        if head_msgs:
            fixed_tokens = count_messages([*layout.fixed, *head_msgs, *layout.current], tk, call.extra_tokens)
        pinned = [sendable(m) for m in pinned_turn(state, len(head_list) + len(old), window.messages, kind, cfg)]
        fitted = fit_pinned_and_window(pinned, window.messages, b_bar - fixed_tokens, cfg, tk, kind != "agent")
        before = [*(sendable(m) for m in layout.fixed), *head_msgs]
        after = [*fitted.pinned, *fitted.window, *current.messages]
        base = count_messages(before + after, tk, call.extra_tokens)
        allowance = b_bar - base - PER_MESSAGE
        reference = b_bar - fixed_tokens - int(cfg.tuning.window_share * cfg.budget) - PER_MESSAGE \
            if kind == "agent" else allowance
        return Frame(kind, window_units, old, head_list, before, after, len(head_msgs), fixed_tokens, base,
                     len(fitted.window), fitted.cut, fitted.dropped, fitted.pinned_cut,
                     window.repairs + current.repairs, allowance, reference)

    def _window(self, state: NamespaceState, namespace: str, layout: Layout, call: Call, kind: str,
                units: list[Unit], tail: PackedUnit | None) -> tuple[list[Unit | PackedUnit], list[Unit]]:
        """The recent window and the old units.

        A chat's open unit (the previous exchange) is its recent window, whatever its size: the
        newest turns stay verbatim (cut in the middle only if they alone are over); only if even
        cut it cannot fit does it become an old unit, as the paper has it."""
        cfg = call.cfg
        if kind == "agent":
            return agent_window(units, tail, cfg, self.tokenizer)
        if tail is not None and not call.chat_window and \
                count_messages(tail.messages, self.tokenizer) - 3 > cfg.tuning.window_share * cfg.budget:
            return [], list(self.sync.sync(state, namespace, layout.body, cfg, final=True).units)
        return ([tail] if tail is not None else []), list(units)

    def recall(self, state: NamespaceState, layout: Layout, call: Call, frame: Frame) -> MemoryRender | None:
        """The memory of the old units within the frame's allowance (None: no old unit, or no room)."""
        cfg = call.cfg
        notes = state.index.notes_of_units(frame.old)
        if not notes or frame.allowance <= memory_wrapper_tokens(self.tokenizer):
            return None
        question = cfg.history == "reader" or bool(layout.current)
        query = self.queries.make(cfg, layout.task, layout.current, frame.window_units, call.query)
        recent = fixed = ""
        if not question and cfg.tuning.revealed_share > 0:
            recent = "\n".join(m.text for m in frame.after)
            fixed = "\n".join(m.text for m in frame.before)
        recall = RecallCall(notes, state.index, cfg, self.tokenizer, query, question, call.stable, recent, fixed)
        return self.composer.compose(recall, frame.allowance, max(frame.allowance, frame.reference_allowance))

    def report(self, state: NamespaceState, call: Call, frame: Frame, mem: MemoryRender | None,
               messages: list[Message], tokens: int, final_repairs: int) -> Report:
        """What the render did, from its frame and memory."""
        cfg = call.cfg
        repairs = frame.repairs + final_repairs
        shown = mem is not None and mem.tokens <= frame.allowance
        strategy = self.composer.strategy
        said = mem.strategy_report if mem is not None else strategy.nothing_old()
        report = Report(
            passthrough=False, budget=cfg.budget, total_tokens=tokens, pairing_repairs=repairs,
            sanitised_messages=sum(1 for m in messages if m.metadata.get("flexamem_sanitised")),
            mode=cfg.mode, history=frame.kind, effective_budget=cfg.effective_budget,
            prompt_tokens=frame.fixed_tokens,
            window_tokens=frame.base - frame.fixed_tokens + 3 if frame.after else 0,
            window_units=len(frame.window_units), old_units=len(frame.old), newest_unit_cut_messages=frame.cut,
            window_messages=frame.window_messages if not (frame.cut or frame.dropped or repairs or frame.pinned_cut)
            else None,
            newest_unit_dropped_steps=frame.dropped, pinned_turn_cut_messages=frame.pinned_cut,
            allowance=frame.allowance, reference_allowance=frame.reference_allowance,
            memory_tokens=mem.tokens if mem else 0,
            unused_allowance=max(0, frame.allowance - (mem.tokens if mem and shown else 0)),
            spent=mem.spent if mem else {"timeline": 0, "raw": 0, "excerpt": 0, "pieces": 0},
            units=mem.units if mem else [], unit_runs=mem.unit_runs if mem else [],
            resolutions=count_resolutions(mem.unit_runs if mem else [], mem.units if mem else []),
            pieces=mem.pieces if mem else [], llm_calls=mem.llm_calls if mem else 0,
            recovered_dropped=mem.dropped if mem else 0,
            strategy=(strategy.report_key, said) if strategy.report_key and said is not None else None)
        if frame.head_units:
            report = with_head(report, [state.index.note(u.key) for u in frame.head_units], frame.head_messages)
        return report


def passthrough(history: Sequence[Message], cfg: FlexAMemConfig, tokenizer: Tokenizer,
                extra_tokens: int) -> Outcome | None:
    """The history itself as sent (the rules applied), or None when that copy is over the budget:
    a history below the budget that breaks a rule (a NUL byte, an open tool call, a second system
    message) gets the same rules as a rendered request, and its count is of the copy sent."""
    sent = apply_properties(history)
    total = count_messages(sent.messages, tokenizer, extra_tokens)
    if total > cfg.effective_budget:
        return None  # a repair (a placeholder result) took it over: render instead
    return Outcome(sent.messages, None, total, Report(passthrough=True, budget=cfg.budget, total_tokens=total,
                                                      pairing_repairs=sent.repairs,
                                                      sanitised_messages=sent.sanitised))


def render_fitted(layout: Layout, call: Call, namespace: str, tokenizer: Tokenizer,
                  attempt: Callable[[Layout], Outcome]) -> Outcome:
    """``attempt`` on the layout with its task (agents) or current turn (readers) whole while
    that part and the newest step fit ``B_bar`` (the newest step is cut first, with its mark,
    and the memory gets what is left); else with the part cut, with the mark, to ``B_bar`` less
    the recent window's share (so the steps after it keep room); when even then the newest step
    cannot fit, once more with that part cut to its marks. The report's ``task_cut_messages``
    counts the messages cut."""
    cfg = call.cfg
    limit = cfg.effective_budget - int(cfg.tuning.window_share * cfg.budget)
    fitted, n_cut = fit_fixed(layout, limit, tokenizer, call.extra_tokens)
    if n_cut:
        try:
            return attempt(layout).with_report(task_cut_messages=0)
        except BudgetError:
            fitted, n_cut = _fit_fixed(layout, call, namespace, tokenizer, limit)  # says why, once
    try:
        outcome = attempt(fitted)
    except BudgetError:
        bones, n_bones = _fit_fixed(layout, call, namespace, tokenizer, 0)
        if not n_bones or count_messages([*bones.fixed, *bones.current], tokenizer) >= \
                count_messages([*fitted.fixed, *fitted.current], tokenizer):
            raise
        outcome, n_cut = attempt(bones), n_bones
    return outcome.with_report(task_cut_messages=n_cut)


def _fit_fixed(layout: Layout, call: Call, namespace: str, tokenizer: Tokenizer, limit: int) -> tuple[Layout, int]:
    """The task or current turn cut to ``limit`` (system prompt and extra tokens counted in it);
    one WARNING per namespace."""
    fitted, n_cut = fit_fixed(layout, limit, tokenizer, call.extra_tokens)
    if n_cut:
        part = " and ".join(name for name, msgs in (("task", layout.task), ("current turn", layout.current)) if msgs)
        warn_once(f"fixed-cut:{namespace}",
                  "render %s: the %s (%d tokens) and the newest step do not fit the budget %d together; "
                  "it is cut in the middle with a visible mark (the history passed in keeps it whole)", namespace, part,
                  count_messages([*layout.task, *layout.current], tokenizer), call.cfg.budget)
    return fitted, n_cut
