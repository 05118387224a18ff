"""A message far larger than any budget, and the check that it was cut by the one rule.

Every adapter's test sends it first (as the task) and third (as a later turn) and expects the
same thing: the message is cut in the middle with FlexA-Mem's visible mark, its head and
tail kept, and the request fits the budget.
"""

from __future__ import annotations

MARK = "omitted by FlexA-Mem to fit the budget"
HEAD, TAIL = "BEGIN-OF-THE-LONG-MESSAGE", "END-OF-THE-LONG-MESSAGE"


def long_text(tokens: int = 43_000) -> str:
    """About ``tokens`` o200k tokens, with a distinctive head and tail."""
    lines = [f"row {i}: sensor reading {i * 37 % 1009} within tolerance" for i in range(tokens * 10 // 117)]
    return "\n".join([HEAD, *lines, TAIL])


def is_cut(text: str) -> bool:
    """The long message as the rule sends it: its head, the mark, its tail (a host's wrapping around)."""
    head, mark, tail = text.find(HEAD), text.find(MARK), text.rfind(TAIL)
    return 0 <= head < mark < tail
