"""Prompt-cache marks where a rendered request's stable parts end, for models that mark them.

mini-swe-agent marks Anthropic requests for caching (``set_cache_control: default_end``, the
default for Claude models): its ``_prepare_messages_for_api`` clears every mark and puts one
on the last message, so a request is cached up to its end. A FlexA-Mem request also has
stable parts inside it (the fixed prompt, the memory: ``Rendered.cache_breakpoints()``,
:mod:`flexamem_core.cache.breakpoints`); :class:`CacheMarks` wraps that method of the inner
model so the prepared messages carry a mark there too, in the shape mini-swe-agent writes its
own (three marks of the four Anthropic allows). A model that marks nothing is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

EPHEMERAL = {"type": "ephemeral"}


def set_mark(entry: dict[str, Any]) -> None:
    """Mark one prepared message as mini-swe-agent marks its last one: the first content
    block (text content becomes one text block), or the message itself where it has no content
    or is a tool result."""
    content = entry.get("content")
    if content is None or entry.get("role") == "tool":
        entry["cache_control"] = dict(EPHEMERAL)
        return
    if isinstance(content, str):
        entry["content"] = [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]
    elif isinstance(content, list) and content and isinstance(content[0], dict):
        entry["content"] = [{**content[0], "cache_control": dict(EPHEMERAL)}, *content[1:]]


class CacheMarks:
    """Keeps the marks of the request being sent, and adds them where the inner model marks."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.points: tuple[int, ...] = ()
        prepare = getattr(inner, "_prepare_messages_for_api", None)
        if callable(prepare) and hasattr(getattr(inner, "config", None), "set_cache_control"):
            inner._prepare_messages_for_api = self._wrap(prepare)

    def _wrap(self, prepare: Callable[[list[dict]], list[dict]]) -> Callable[[list[dict]], list[dict]]:
        def prepare_with_marks(messages: list[dict]) -> list[dict]:
            prepared = prepare(messages)
            if getattr(self.inner.config, "set_cache_control", None) is None:
                return prepared
            for i in self.points:
                if 0 <= i < len(prepared) - 1:  # the last one is the inner model's own
                    set_mark(prepared[i])
            return prepared
        return prepare_with_marks

    def use(self, points: Sequence[int]) -> None:
        """The marks of the request sent next (indices of its messages)."""
        self.points = tuple(points)
