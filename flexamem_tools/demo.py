"""``flexamem demo``: what the model sees, at two budgets, for a long agent run and a long chat.

Runs offline on the default embedded setup (in-memory store, o200k_base, the packaged
all-MiniLM-L6-v2): no server, no API key. Each invented history ends with a question whose
answer is one exact string said once, far back (:mod:`flexamem_tools.demo_data`). By default
it prints one short table per history (a row per budget: how the request's tokens were spent,
down to each kind of recovered old text) and, per budget, whether the answer is in the request
and where (:mod:`flexamem_tools.demo_answer`); ``--full`` prints every message sent,
``--html PAGE`` writes the picture of every render (:mod:`flexamem_tools.replay_html`),
``--json`` the full reports.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from flexamem_core.config import FlexAMemConfig
from flexamem_core.memory import FlexAMem
from flexamem_core.model.messages import Message, message_text
from flexamem_core.request.marker import is_marked
from flexamem_core.request.rendered import Rendered

from .demo_answer import answer_line, places
from .demo_data import (
    AGENT_ANSWER,
    AGENT_QUESTION,
    CHAT_ANSWER,
    CHAT_QUESTION,
    agent_history,
    conversation_history,
)

HELP = "replay a long agent run and a long chat at two budgets (offline)"

INTRO = ("FlexA-Mem demo: two long invented histories, each followed by a question whose answer was said once, "
         "far back.\nFor two budgets it builds the request a model would get (prompt, <memory>, newest messages) "
         "and looks for the answer.")
LEGEND = ('Numbers are tokens, but for ms and counts: "9 (1,307)" is 9 items, 1,307 tokens in all. sent: the whole\n'
          "request, at most 0.95 x budget. The <memory> message holds a timeline (a record per old unit of history,\n"
          "several merged into one line when room is short) and exact old text: whole units, excerpts, pieces.\n"
          "ms: the time to build the request (the first of each history also embeds the question).")
SYSTEM_PROMPT = "Answer from the memory of past conversations."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budgets", type=int, nargs=2, default=[3000, 8000], metavar=("SMALL", "LARGE"),
                        help="the two budgets to render at (tokens)")
    parser.add_argument("--full", action="store_true", help="print every message sent, in full")
    parser.add_argument("--html", default=None, metavar="PAGE.html", help="write the renders as one HTML page")
    parser.add_argument("--json", action="store_true",
                        help="print the full render reports, and where each answer is, as JSON")


@dataclass
class Shown:
    """One render of the demo, with what the table needs."""

    history: str
    budget: int
    rendered: Rendered
    ms: float
    #: Where the answer is in the request (keys of :data:`flexamem_tools.demo_answer.PLACES`).
    answer_in: list[str] = field(default_factory=list)


def _counted(n: int, tokens: int) -> str:
    return f"{n} ({tokens:,})" if n else "0"


def _timeline_cell(rep: dict[str, Any]) -> str:
    units = rep.get("resolutions") or {}
    parts = [f"{units.get('record', 0)}"] if units.get("record") else []
    parts += [f"{units[k]} {k}" for k in ("merged", "hidden") if units.get(k)]
    return f"{' + '.join(parts) or '0'} ({(rep.get('spent') or {}).get('timeline', 0):,})"


def _table(prompt_name: str, shown: list[Shown]) -> Table:
    table = Table()
    for name in ("budget", "sent", f"system\n+ {prompt_name}", "newest\nmessages", "timeline\nrecords",
                 "whole\nunits", "excerpts", "pieces", "unused", "ms"):
        table.add_column(name, justify="right")
    for s in shown:
        rep = s.rendered.report
        units, spent = rep.get("resolutions") or {}, rep.get("spent") or {}
        window = rep.get("window_tokens", 0) if rep.get("window_units") else 0
        table.add_row(f"{s.budget:,}", f"{s.rendered.tokens:,}", f"{rep.get('prompt_tokens', 0):,}", f"{window:,}",
                      _timeline_cell(rep), _counted(units.get("raw", 0), spent.get("raw", 0)),
                      _counted(units.get("excerpt", 0), spent.get("excerpt", 0)),
                      _counted(len(rep.get("pieces") or ()), spent.get("pieces", 0)),
                      f"{s.budget - s.rendered.tokens:,}", f"{s.ms:.0f}")
    return table


def _said(history: list[Message], answer: str) -> str:
    """Where the history says ``answer``: ``once, in message 6 of 123``."""
    at = [str(i + 1) for i, m in enumerate(history) if answer in message_text(m)]
    if len(at) == 1:
        return f"once, in message {at[0]} of {len(history)}"
    return f"in messages {', '.join(at)} of {len(history)}" if at else "nowhere"


def _print_history(console: Console, head: str, question: str, answer: str, said: str, prompt_name: str,
                   shown: list[Shown]) -> None:
    console.print(f"\n{head}\n  \"{question}\"\n  The answer, \"{answer}\", was said {said}.", highlight=False)
    console.print(_table(prompt_name, shown))
    for s in shown:
        console.print(f"budget {s.budget:,}: {answer_line(answer, s.answer_in)}", highlight=False)


def _print_full(console: Console, s: Shown) -> None:
    console.rule(f"{s.history} at budget {s.budget:,}: {s.rendered.tokens:,} tokens sent")
    for m in s.rendered.messages:
        tag = " [FlexA-Mem memory]" if is_marked(m.metadata) else ""
        console.print(f"--- {m.role}{tag}", markup=False, highlight=False)
        console.print(message_text(m), markup=False, highlight=False)


def _render(mem: FlexAMem, history_name: str, namespace: str, budgets: list[int], answer: str,
            call: Callable[[FlexAMem, int], Rendered]) -> list[Shown]:
    """One render per budget, each by its own instance over ``mem``'s store: every render is a
    thread's first call, made for the whole budget (a later call of the same thread at another
    budget would be rendered smaller, leaving room for the next calls to append)."""
    shown = []
    for budget in budgets:
        at = FlexAMem(mem.config.updated(budget=budget), store=mem.store, tokenizer=mem.tokenizer,
                      embedder=mem.embedder)
        at.state(namespace)  # load the stored index before the clock starts
        t0 = time.perf_counter()
        rendered = call(at, budget)
        ms = 1000 * (time.perf_counter() - t0)
        shown.append(Shown(history_name, budget, rendered, ms, places(rendered, answer)))
    return shown


def run(args: argparse.Namespace) -> int:
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = 120  # a log file: no terminal width to fit, keep the table whole
    budgets = list(args.budgets)
    console.print(INTRO, highlight=False)
    mem = FlexAMem(FlexAMemConfig(budget=max(budgets)))
    console.print(f"Loading the embedding model once ({mem.warm():.1f} s).", highlight=False)

    history = agent_history()
    steps = sum(1 for m in history if m.role == "assistant")
    with tqdm(total=steps // 3 + 1, desc="writing notes (agent)", unit="unit", disable=None, leave=False) as bar:
        mem.ingest(history, namespace="demo-agent", progress=bar)
    agent = _render(mem, "agent run", "demo-agent", budgets, AGENT_ANSWER,
                    lambda at, b: at.render(history, namespace="demo-agent", budget=b))
    head = f"A coding agent's run: {steps} tool calls, {mem.count_messages(history):,} tokens. Then the user asks:"
    _print_history(console, head, AGENT_QUESTION, AGENT_ANSWER, _said(history, AGENT_ANSWER), "task", agent)

    reader = FlexAMem(FlexAMemConfig(budget=max(budgets), history="reader"), tokenizer=mem.tokenizer,
                      embedder=mem.embedder)
    chat = conversation_history()
    with tqdm(total=len(chat) // 12 + 1, desc="writing notes (chat)", unit="unit", disable=None,
              leave=False) as bar:
        reader.ingest(chat, namespace="demo-chat", final=True, progress=bar)
    talk = _render(reader, "chat question", "demo-chat", budgets, CHAT_ANSWER,
                   lambda at, b: at.render_question(CHAT_QUESTION, namespace="demo-chat", budget=b,
                                                    system_prompt=SYSTEM_PROMPT))
    sessions = len({m.metadata["session"] for m in chat})
    head = f"A chat of {sessions} sessions: {reader.count_messages(chat):,} tokens. Then it is asked:"
    _print_history(console, head, CHAT_QUESTION, CHAT_ANSWER, _said(chat, CHAT_ANSWER), "question", talk)
    console.print(f"\n{LEGEND}", highlight=False)

    shown = agent + talk
    if args.full:
        for s in shown:
            _print_full(console, s)
    if args.html:
        from .replay_html import write_html

        path = write_html([s.rendered for s in shown], args.html, title="FlexA-Mem demo",
                          subtitle=f'steps 1-2: the agent run at each budget (its answer: "{AGENT_ANSWER}"); '
                                   f'steps 3-4: the chat question (its answer: "{CHAT_ANSWER}")')
        console.print(f"Wrote {path}: open it in a browser.", highlight=False)
    elif not args.full:
        console.print("Every message sent: flexamem demo --full; a picture of each render: "
                      "flexamem demo --html demo.html", highlight=False)
    if args.json:
        answers = {"agent run": AGENT_ANSWER, "chat question": CHAT_ANSWER}
        print(json.dumps([{"history": s.history, "budget": s.budget, "answer": answers[s.history],
                           "answer_in": s.answer_in, "report": s.rendered.report} for s in shown],
                         indent=1, default=str))
    return 0
