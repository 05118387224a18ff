"""The checks every adversarial render must pass, written apart from the library's own code
where they can be (the token count, the pairing check), and counted per invariant."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from flexamem_core import BudgetError, Message
from flexamem_core.request.properties import PROPERTIES, Context
from flexamem_core.request.tokens import SAFE_WS_RUN

from ..core.checks import independent_tokens, sent_calls, sent_text, structure_problem, unsendable

#: Cases checked per invariant, over the whole session (printed by conftest).
CHECKED: Counter[str] = Counter()
FAILURES: list[str] = []
_LONG_WS = re.compile(rf"\s{{{SAFE_WS_RUN},}}")


def _fail(where: str, invariant: str, why: str) -> None:
    if len(FAILURES) < 50:
        FAILURES.append(f"{where}: {invariant}: {why}")


def check(name: str, ok: bool, where: str, why: str = "") -> None:
    CHECKED[name] += 1
    if not ok:
        _fail(where, name, why)


def check_render(r: Any, source: Sequence[Message], budget: int, extra_tokens: int, kind: str, where: str,
                 origin: str = "generated") -> None:
    """Every invariant of one render; ``origin`` says where its history came from (counted apart)."""
    CHECKED["renders"] += 1
    CHECKED[f"renders of {origin} histories"] += 1
    b_bar = int(budget * 0.95)
    check("within_budget", r.tokens <= b_bar, where, f"{r.tokens} > {b_bar}")
    if any(_LONG_WS.search(sent_text(m) + sent_calls(m)) for m in r.messages):
        check("counted_as_sent (upper bound)", independent_tokens(r.messages) + extra_tokens <= r.tokens, where)
    else:
        sent = independent_tokens(r.messages) + extra_tokens if r.messages else extra_tokens
        check("counted_as_sent", sent == r.tokens, where, f"sent {sent}, counted {r.tokens}")
    check("valid_json_utf8", _serialisable(r.messages) and not unsendable(r.messages), where)
    problem = structure_problem(r.messages)
    check("pairing_and_system (independent check)", problem is None, where, str(problem))
    context = Context(source, r.report, kind)
    for prop in PROPERTIES:
        why = prop.problem(r.messages, context)
        check(prop.name, why is None, where, str(why))
    memory = sum(1 for m in r.messages if m.metadata.get("flexamem") == "memory")
    check("at_most_one_memory_message", memory <= 1, where)


def check_budget_error(exc: BudgetError, fixed: Sequence[Message], newest: Sequence[Message], budget: int,
                       extra_tokens: int, where: str) -> None:
    """A BudgetError only when the system prompt, the task (or current turn) and the newest step,
    both cut to their bones, cannot fit: any message but the system prompt may be cut with the mark."""
    from flexamem_core.request.tokens import default_tokenizer

    tk = default_tokenizer()

    def bones(messages: Sequence[Message]) -> int:
        return sum(4 + min(tk.count(m.text), 60) + tk.count(sent_calls(m)) + tk.count(m.tool_call_id or "")
                   for m in messages)

    system = [m for m in fixed if m.role == "system"]
    prompt = independent_tokens(system) if system else 3
    task = [m for m in fixed if m.role != "system"]
    need = prompt + bones(task) + extra_tokens + bones(newest) + 80  # 80: a pinned turn cut down
    check("budget_error_only_when_nothing_fits", need > budget * 0.95, where, f"{exc} (needs ~{need})")


def _serialisable(messages: Sequence[Message]) -> bool:
    try:
        json.dumps([m.to_dict() for m in messages], ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, TypeError, ValueError):
        return False
    return True
