"""``flexamem demo``: what the model sees, at two budgets, for a long agent run and a long chat.

Runs offline on the default embedded setup (in-memory store, o200k_base, the packaged
all-MiniLM-L6-v2): no server, no API key. By default it prints one short table per
history (a row per budget: how the budget was spent and what each old unit became);
``--full`` prints every message sent, ``--html PAGE`` writes the picture of every render
(:mod:`flexamem_tools.replay_html`), ``--json`` the full reports.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from flexamem_core.config import FlexAMemConfig
from flexamem_core.memory import FlexAMem
from flexamem_core.model.messages import message_text
from flexamem_core.recall.report import RESOLUTIONS
from flexamem_core.request.marker import is_marked
from flexamem_core.request.rendered import Rendered

from .demo_data import agent_history, conversation_history, conversation_questions

HELP = "replay a long agent run and a long chat at two budgets (offline)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budgets", type=int, nargs=2, default=[3000, 8000], metavar=("SMALL", "LARGE"),
                        help="the two budgets to render at (tokens)")
    parser.add_argument("--full", action="store_true", help="print every message sent, in full")
    parser.add_argument("--html", default=None, metavar="PAGE.html", help="write the renders as one HTML page")
    parser.add_argument("--json", action="store_true", help="print the full render reports as JSON")


@dataclass
class Shown:
    """One render of the demo, with what the table needs."""

    history: str
    budget: int
    rendered: Rendered
    ms: float


def _table(title: str, history_tokens: int, shown: list[Shown]) -> Table:
    table = Table(title=f"{title}: {history_tokens:,} tokens of history", title_justify="left")
    for name in ("budget", "sent", "system+task", "memory", "window", "unused", *RESOLUTIONS, "ms"):
        table.add_column(name, justify="right")
    for s in shown:
        rep = s.rendered.report
        units = rep.get("resolutions") or {}
        prompt, memory = rep.get("prompt_tokens", 0), rep.get("memory_tokens", 0)
        table.add_row(f"{s.budget:,}", f"{s.rendered.tokens:,}", f"{prompt:,}", f"{memory:,}",
                      f"{s.rendered.tokens - prompt - memory:,}", f"{s.budget - s.rendered.tokens:,}",
                      *(str(units.get(r, 0)) for r in RESOLUTIONS), f"{s.ms:.0f}")
    return table


def _print_full(console: Console, s: Shown) -> None:
    console.rule(f"{s.history} at budget {s.budget:,}: {s.rendered.tokens:,} tokens sent")
    for m in s.rendered.messages:
        tag = " [FlexA-Mem memory]" if is_marked(m.metadata) else ""
        console.print(f"--- {m.role}{tag}", markup=False, highlight=False)
        console.print(message_text(m), markup=False, highlight=False)


def _render(mem: FlexAMem, history_name: str, budgets: list[int], call) -> list[Shown]:
    shown = []
    for budget in budgets:
        t0 = time.perf_counter()
        rendered = call(budget)
        shown.append(Shown(history_name, budget, rendered, 1000 * (time.perf_counter() - t0)))
    return shown


def run(args: argparse.Namespace) -> int:
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = 120  # a log file: no terminal width to fit, keep the table whole
    budgets = list(args.budgets)
    mem = FlexAMem(FlexAMemConfig(budget=max(budgets)))
    console.print(f"Loading the embedding model once ({mem.warm():.1f} s).", highlight=False)
    history = agent_history()
    tokens = mem.count_messages(history)
    n_units = sum(1 for m in history if m.role == "assistant") // 3 + 1
    with tqdm(total=n_units, desc="writing notes (agent)", unit="unit", disable=None, leave=False) as bar:
        mem.ingest(history, namespace="demo-agent", progress=bar)
    agent = _render(mem, "agent run", budgets,
                    lambda b: mem.render(history, namespace="demo-agent", budget=b))

    reader = FlexAMem(FlexAMemConfig(budget=max(budgets), history="reader"))
    chat = conversation_history()
    chat_tokens = reader.count_messages(chat)
    with tqdm(total=len(chat) // 12 + 1, desc="writing notes (chat)", unit="unit", disable=None,
              leave=False) as bar:
        reader.ingest(chat, namespace="demo-chat", final=True, progress=bar)
    question = conversation_questions()[0]
    prompt = "Answer from the memory of past conversations."
    talk = _render(reader, "chat question", budgets, lambda b: reader.render_question(
        question, namespace="demo-chat", budget=b, system_prompt=prompt))

    console.print(_table(f"Agent run ({len(history)} messages)", tokens, agent))
    console.print(_table(f"Chat of {len({m.metadata['session'] for m in chat})} sessions, asked {question!r}",
                         chat_tokens, talk))
    shown = agent + talk
    if args.full:
        for s in shown:
            _print_full(console, s)
    if args.json:
        print(json.dumps([{"history": s.history, "budget": s.budget, "report": s.rendered.report} for s in shown],
                         indent=1, default=str))
    if args.html:
        from .replay_html import write_html

        path = write_html([s.rendered for s in shown], args.html, title="FlexA-Mem demo",
                          subtitle="steps 1-2: the agent run at each budget; steps 3-4: the chat question")
        console.print(f"Wrote {path}: open it in a browser.", highlight=False)
    elif not args.full:
        console.print("Every message sent: flexamem demo --full; a picture of each render: "
                      "flexamem demo --html demo.html", highlight=False)
    return 0
