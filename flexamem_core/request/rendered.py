"""What a render returns: the messages to send, the memory text, the exact count and the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.messages import Message


@dataclass
class Rendered:
    """What to send to the model, the memory text, its exact token count and the report."""

    messages: list[Message]
    memory_text: str | None
    tokens: int
    report: dict[str, Any] = field(default_factory=dict)
    passthrough: bool = False
