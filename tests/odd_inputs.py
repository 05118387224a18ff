"""The odd inputs every adapter suite meets, and the check that the task survived them.

Each framework's suite runs a conversation that outgrows the budget, then one of ``ODD``:
an empty question, a 50,000-character question, a 300-token budget, an image, an orphan
tool result; every request must still hold the task, whole or cut with the visible mark.
"""

from __future__ import annotations

import base64

from flexamem_core.request.cuts import TRUNCATION_MARK

ODD = ["empty question", "50,000-character question", "300-token budget", "an image", "an orphan tool result"]
#: A 1x1 PNG: a real image, as a multimodal message carries it.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PNG = base64.b64decode(PNG_B64)
PNG_URL = f"data:image/png;base64,{PNG_B64}"
MARK_HEAD = TRUNCATION_MARK.split("{n}")[0]


def budget_for(odd: str, budget: int) -> int:
    """The suite's budget, or 300 tokens for that odd input."""
    return 300 if odd == "300-token budget" else budget


def question_for(odd: str, question: str) -> str:
    """The question the odd input asks: empty, over 50,000 characters, or the suite's own."""
    if odd == "empty question":
        return ""
    if odd == "50,000-character question":
        return f"{question} " + "details " * 6250
    return question


def is_task(text: str, task: str) -> bool:
    """A message text that is the task, whole or cut in the middle with the visible mark."""
    return text == task or (text.startswith(task[:20]) and MARK_HEAD in text)
