"""``flexamem replay``: what a saved mini-swe-agent run would have shown its model, per step.

For every model call of a saved ``.traj.json`` (v1 or v2; JSON Lines collections with
``--instance``/``--index``), the history the model had at that call is rendered with
FlexA-Mem for ``--budget``, in order, with one memory, exactly as :class:`FlexAMemModel`
would have done live (memoised merges included). The rendered context is printed step by
step with a summary of the render report, or as one JSON document with ``--json``.

Every step also says what a provider's prompt cache would have reused from the previous
call (``cached_tokens``) and what the call costs (``cost``, in plain input tokens: a cached
token 0.1, a new one 1.25; :mod:`flexamem_core.cache.prefix`); the totals over the run's
calls (``cached_prefix_share``, ``cost_per_call``) close the output. The tool schemas are
sent first and are the same on every call, so they are cached whenever a previous call was.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from flexamem_core import FlexAMem, Message, MessageError, registered_strategies
from flexamem_core.cache.prefix import CACHED_PRICE, NEW_PRICE, call_cost, common_prefix_tokens
from flexamem_core.host import is_marked
from flexamem_core.model.messages import message_text

from .convert import ConvertedHistory, detect_style, to_core, to_host
from .settings import FlexAMemSettings
from .tools import tool_schema_tokens
from .trajectory import TrajectoryError, load_trajectories, model_calls, model_class_path, select_trajectory

HELP = "render a saved mini-swe-agent .traj.json step by step (text, JSON or an HTML page)"


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``flexamem replay``."""
    parser.add_argument("trajectory", help="a saved .traj.json (or .json/.jsonl[.gz] of several trajectories)")
    parser.add_argument("--budget", type=int, default=8000, help="context budget in tokens (default 8000)")
    parser.add_argument("--step", type=int, default=None,
                        help="show only model call N (1-based; earlier calls are still rendered first)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    parser.add_argument("--html", default=None, metavar="OUT.html",
                        help="write one self-contained HTML page of every step (budget split, units, messages)")
    parser.add_argument("--summary", action="store_true", help="one line per step, no message text")
    parser.add_argument("--max-chars", type=int, default=0,
                        help="cut each printed message to this many characters (0: no cut)")
    parser.add_argument("--instance", default=None, help="instance_id to pick from a file of several")
    parser.add_argument("--index", type=int, default=None, help="position to pick from a file of several")
    parser.add_argument("--mode", choices=registered_strategies(), default="auto",
                        help="recovery strategy (default auto, as the live wrapper)")
    parser.add_argument("--tool-schema-tokens", type=int, default=None,
                        help="tokens of tool schemas per call (default: from the trajectory's model class)")


def replay_steps(trajectory: Mapping[str, Any], budget: int, *, memory: FlexAMem | None = None,
                 mode: str = "auto", only_step: int | None = None,
                 tool_tokens: int | None = None) -> list[dict[str, Any]]:
    """Render the history before every model call; return the steps (only ``only_step`` if given)."""
    return replay(trajectory, budget, memory=memory, mode=mode, only_step=only_step,
                  tool_tokens=tool_tokens)["steps"]


class _CacheTotals:
    """Prompt-cache accounting of consecutive calls of one run, tool schemas first."""

    def __init__(self, memory: FlexAMem, tool_tokens: int) -> None:
        self.tokenizer = memory.tokenizer
        self.tool_tokens = tool_tokens
        self.previous: list[Message] | None = None
        self.calls = self.tokens = self.cached = 0
        self.cost = 0.0

    def add(self, messages: Sequence[Message], tokens: int) -> tuple[int, float]:
        """Cached tokens and cost of one call of ``tokens`` tokens (tool schemas included)."""
        hit = 0
        if self.previous is not None:
            hit = min(tokens, self.tool_tokens + common_prefix_tokens(self.previous, messages, self.tokenizer))
        cost = call_cost(tokens, hit)
        self.previous = list(messages)
        self.calls += 1
        self.tokens += tokens
        self.cached += hit
        self.cost += cost
        return hit, cost

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "tokens": self.tokens, "cached_tokens": self.cached,
                "cached_prefix_share": round(self.cached / self.tokens, 6) if self.tokens else 0.0,
                "cost": round(self.cost, 3),
                "cost_per_call": round(self.cost / self.calls, 3) if self.calls else 0.0,
                "price_model": {"unit": "price of one plain (uncached) input token",
                                "cached_token": CACHED_PRICE, "new_token": NEW_PRICE}}


def recorded_tool_tokens(messages: Sequence[Any]) -> int | None:
    """The tool-schema tokens the live wrapper counted, as it saved them in a response's
    ``extra.flexamem`` (what the run really sent); None for a run without the wrapper."""
    for m in messages:
        extra = m.get("extra") if isinstance(m, Mapping) else None
        info = extra.get("flexamem") if isinstance(extra, Mapping) else None
        value = info.get("tool_schema_tokens") if isinstance(info, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def replay(trajectory: Mapping[str, Any], budget: int, *, memory: FlexAMem | None = None,
           mode: str = "auto", only_step: int | None = None, tool_tokens: int | None = None) -> dict[str, Any]:
    """Render the history before every model call: ``{"steps": [...], "totals": {...}}``.

    ``steps`` holds every call (only ``only_step`` if given); ``totals`` is the prompt-cache
    accounting of every call rendered (calls 1 to ``only_step`` if given).
    """
    messages = trajectory.get("messages")
    if not isinstance(messages, list):
        raise TrajectoryError("the trajectory has no 'messages' list")
    calls = model_calls(messages)
    if only_step is not None and not 1 <= only_step <= len(calls):
        raise TrajectoryError(f"step {only_step} out of range: the run made {len(calls)} model calls")
    # The live wrapper's settings (FlexAMemSettings: pin_user_turn off), so replay sends what it sent.
    memory = memory or FlexAMem(FlexAMemSettings(mode=mode).core_config(budget))
    if tool_tokens is None:
        tool_tokens = recorded_tool_tokens(messages)
    if tool_tokens is None:
        tool_tokens = tool_schema_tokens(model_class_path(trajectory), memory.tokenizer,
                                         str(trajectory.get("trajectory_format") or ""))
    seed = json.dumps([trajectory.get("instance_id"), len(messages), budget], default=str)
    namespace = "replay-" + hashlib.sha256(seed.encode()).hexdigest()[:12]
    last = only_step or len(calls)
    steps: list[dict[str, Any]] = []
    totals = _CacheTotals(memory, tool_tokens)
    # One conversion of the whole run: each message converts on its own and its id is its index,
    # so the history before a call is a prefix of the same objects (the core's identity pass
    # then confirms what it already stored), not a new conversion per call.
    whole = to_core(messages[:calls[last - 1]] if calls else [])
    positions = [int(m.id or 0) for m in whole.messages]
    for number, index in enumerate(calls[:last], 1):
        converted = ConvertedHistory(messages=whole.messages[:bisect_left(positions, index)],
                                     originals=whole.originals, style=detect_style(messages[:index]))
        rendered = memory.render(converted.messages, namespace=namespace, budget=budget, extra_tokens=tool_tokens)
        cached, cost = totals.add(rendered.messages, rendered.tokens)
        if only_step is not None and number != only_step:
            continue
        steps.append({
            "step": number,
            "message_index": index,
            "history_messages": len(converted.messages),
            "history_tokens": memory.count_messages(converted.messages, extra_tokens=tool_tokens),
            "tokens": rendered.tokens,
            "cached_tokens": cached,
            "cost": round(cost, 3),
            "passthrough": rendered.passthrough,
            "sent": [_plain(m) for m in to_host(rendered.messages, converted)],
            "rendered": [m.to_dict() for m in rendered.messages],
            "memory_text": rendered.memory_text,
            "report": rendered.report,
        })
    return {"steps": steps, "totals": totals.as_dict()}


def _plain(message: Mapping[str, Any]) -> dict[str, Any]:
    """A sent message as the API would get it: without mini-swe-agent's ``extra``."""
    return {k: v for k, v in message.items() if k != "extra"}


def _scalars(report: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if not isinstance(v, (list, tuple, dict))}


def _cut(text: str, limit: int) -> str:
    if limit and len(text) > limit:
        return text[:limit] + f"\n[... {len(text) - limit} more characters]"
    return text


def print_text(steps: Sequence[Mapping[str, Any]], budget: int, out: TextIO, *, summary: bool,
               max_chars: int, totals: Mapping[str, Any] | None = None) -> None:
    """Human-readable output: a header per step, then (unless summary) every message sent;
    the prompt-cache totals last."""
    print(f"Each step: the history before one model call, and the request FlexA-Mem builds from it for a "
          f"budget of {budget:,} tokens. cached: the tokens a provider's prompt cache would reuse from the "
          f"previous call; cost: the call's price in plain input tokens (a cached token costs {CACHED_PRICE}, "
          f"a new one {NEW_PRICE}).", file=out)
    for step in steps:
        kind = "passthrough" if step["passthrough"] else "memory"
        print(f"=== step {step['step']} (before message {step['message_index']}): history "
              f"{step['history_tokens']:,} tokens in {step['history_messages']} messages -> sent "
              f"{step['tokens']:,} tokens in {len(step['rendered'])} messages, budget {budget:,}, "
              f"cached {step['cached_tokens']:,}, cost {step['cost']:,.1f} [{kind}] ===", file=out)
        if summary:
            continue
        for msg in step["rendered"]:
            label = "memory" if is_marked(msg.get("metadata")) else f"#{msg.get('id')}"
            print(f"--- [{label} {msg['role']}]", file=out)
            print(_cut(message_text(Message.from_dict(msg)), max_chars), file=out)
        if step["report"]:
            print(f"--- report: {json.dumps(_scalars(step['report']), default=str)}", file=out)
        print(file=out)
    if totals:
        print(f"=== prompt cache over {totals['calls']} calls: cached_prefix_share "
              f"{100 * totals['cached_prefix_share']:.1f}% ({totals['cached_tokens']:,} of {totals['tokens']:,} "
              f"tokens), cost_per_call {totals['cost_per_call']:,.1f} (plain input tokens; cached token "
              f"{totals['price_model']['cached_token']}, new {totals['price_model']['new_token']}) ===", file=out)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``flexamem replay``; returns the exit status."""
    os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")  # its banner would spoil --json on stdout
    if args.budget <= 0:
        print("flexamem replay: --budget must be a positive number of tokens", file=sys.stderr)
        return 2
    try:
        trajectory = select_trajectory(load_trajectories(args.trajectory), args.instance, args.index)
        result = replay(trajectory, args.budget, mode=args.mode, only_step=args.step,
                        tool_tokens=args.tool_schema_tokens)
    except (TrajectoryError, MessageError) as exc:
        print(f"flexamem replay: {exc}", file=sys.stderr)
        return 2
    if args.html:
        from flexamem_tools.replay_html import write_html

        name = trajectory.get("instance_id") or os.path.basename(str(args.trajectory))
        path = write_html(result["steps"], args.html, title=f"FlexA-Mem replay: {name}",
                          subtitle=f"budget {args.budget:,} tokens, {args.mode} recovery; prompt cache: "
                                   f"{100 * result['totals']['cached_prefix_share']:.1f}% of tokens reused")
        print(f"wrote {path} ({len(result['steps'])} steps)")
    elif args.json:
        json.dump({"trajectory": str(args.trajectory), "instance_id": trajectory.get("instance_id"),
                   "trajectory_format": trajectory.get("trajectory_format"), "budget": args.budget,
                   "steps": result["steps"], "totals": result["totals"]},
                  sys.stdout, indent=1, default=str, ensure_ascii=False)
        print()
    else:
        print_text(result["steps"], args.budget, sys.stdout, summary=args.summary, max_chars=args.max_chars,
                   totals=result["totals"])
    return 0
