"""``flexamem demo``: what the model sees, at two budgets, for a long agent run and a long chat.

Runs offline on the default embedded setup (in-memory store, o200k_base, the packaged
all-MiniLM-L6-v2): no server, no API key.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from tqdm import tqdm

from .config import FlexAMemConfig
from .demo_data import agent_history, conversation_history, conversation_questions
from .memory import FlexAMem
from .messages import message_text
from .render import Rendered

RULE = "=" * 100


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budgets", type=int, nargs=2, default=[3000, 8000], metavar=("SMALL", "LARGE"),
                        help="the two budgets to render at (tokens)")
    parser.add_argument("--full", action="store_true", help="print every message in full")
    parser.add_argument("--json", action="store_true", help="print the full render reports as JSON")


def _show(text: str, full: bool, max_lines: int = 40) -> str:
    lines = text.splitlines()
    if full or len(lines) <= max_lines:
        return text
    keep = max_lines // 2
    return "\n".join([*lines[:keep], f"    [... {len(lines) - 2 * keep} more lines ...]", *lines[-keep:]])


def _print_render(title: str, history_tokens: int, r: Rendered, full: bool, as_json: bool) -> None:
    rep = r.report
    print(RULE)
    print(f"{title}: history {history_tokens:,} tokens -> sent {r.tokens:,} tokens "
          f"(budget {rep['budget']:,}, usable {rep['effective_budget']:,})")
    print(RULE)
    for m in r.messages:
        tag = " [FlexA-Mem memory]" if m.metadata.get("flexamem") == "memory" else ""
        print(f"--- {m.role}{tag}")
        print(_show(message_text(m), full or bool(tag), 200 if tag else 12))
    resolutions = Counter(u["resolution"] for u in rep.get("units", []))
    print(f"--- report: allowance {rep.get('allowance')} tokens; spent {rep.get('spent')}; "
          f"units by resolution {dict(resolutions)}; pieces {len(rep.get('pieces', []))}")
    why = Counter(u.get("why") for u in rep.get("units", []) if u["resolution"] in ("raw", "excerpt"))
    if why:
        print(f"    recovered units reached as: {dict(why)}")
    if as_json:
        print(json.dumps(rep, indent=1))


def run(args: argparse.Namespace) -> int:
    small, large = args.budgets
    mem = FlexAMem(FlexAMemConfig(budget=large))
    history = agent_history()
    tokens = mem.count_messages(history)
    print(f"FlexA-Mem demo. Agent run: {len(history)} messages, {tokens:,} tokens.")
    n_units = sum(1 for m in history if m.role == "assistant") // 3 + 1
    with tqdm(total=n_units, desc="writing notes (agent)", unit="unit") as bar:
        mem.ingest(history, namespace="demo-agent", progress=bar)
        bar.total = bar.n
        bar.refresh()
    for budget in (small, large):
        t0 = time.perf_counter()
        r = mem.render(history, namespace="demo-agent", budget=budget)
        _print_render(f"AGENT at budget {budget:,} (rendered in {1000 * (time.perf_counter() - t0):.0f} ms)",
                      tokens, r, args.full, args.json)

    reader = FlexAMem(FlexAMemConfig(budget=large, history="reader", mode="piece"))
    chat = conversation_history()
    chat_tokens = reader.count_messages(chat)
    print(f"\nConversation: {len(chat)} turns over {len({m.metadata['session'] for m in chat})} sessions, "
          f"{chat_tokens:,} tokens.")
    with tqdm(total=len(chat) // 12 + 1, desc="writing notes (chat)", unit="unit") as bar:
        reader.ingest(chat, namespace="demo-chat", final=True, progress=bar)
        bar.total = bar.n
        bar.refresh()
    question = conversation_questions()[0]
    for budget in (small, large):
        t0 = time.perf_counter()
        r = reader.render_question(question, namespace="demo-chat", budget=budget,
                                   system_prompt="Answer from the memory of past conversations.")
        _print_render(f"CHAT question {question!r} at budget {budget:,} (piece recovery, "
                      f"{1000 * (time.perf_counter() - t0):.0f} ms)", chat_tokens, r, args.full, args.json)
    return 0

