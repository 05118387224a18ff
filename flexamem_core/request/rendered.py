"""What a render returns: the messages to send, the memory text, the exact count and the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..model.messages import Message
from .marker import cache_breakpoints
from .wire import chat_message


@dataclass
class Rendered:
    """What to send to the model, the memory text, its exact token count and the report."""

    messages: list[Message]
    memory_text: str | None
    tokens: int
    report: dict[str, Any] = field(default_factory=dict)
    passthrough: bool = False

    def chat_messages(self) -> list[dict[str, Any]]:
        """``messages`` as chat-completions dicts, ready for a provider client
        (``client.chat.completions.create(messages=r.chat_messages())``)."""
        return [chat_message(m) for m in self.messages]

    def cache_breakpoints(self) -> tuple[int, ...]:
        """Indices of ``messages`` after which a stable part ends (the fixed prompt, the memory),
        where a provider that caches only at marked places should get a mark besides the one the
        host sets at the end (:func:`~flexamem_core.request.marker.cache_breakpoints`)."""
        return cache_breakpoints(self.messages)
