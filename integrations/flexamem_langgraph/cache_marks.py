"""Prompt-cache marks where a rendered request's stable parts end, for Anthropic models behind
LangChain's prompt-caching middleware.

``AnthropicPromptCachingMiddleware`` (langchain-anthropic) asks ``ChatAnthropic`` to cache each
request up to its end: it sets ``model_settings["cache_control"]`` and the model marks the last
message. A FlexA-Mem request also has stable parts inside it (the fixed prompt, the memory:
``Rendered.cache_breakpoints()``, :mod:`flexamem_core.cache.breakpoints`), which a provider that
caches only at marked places reads again only if they are marked. Where a request carries that
setting, :func:`marked` puts the same ``cache_control`` on the last content block of those
messages (the shape Anthropic's API takes), on copies: the host's messages are not touched. With
the model's own mark that is three of the four marks Anthropic allows. A request without the
setting is sent as rendered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage


def with_mark(message: BaseMessage, control: Mapping[str, Any]) -> BaseMessage:
    """A copy of ``message`` whose last content block carries ``control`` (text content becomes
    one text block); a message without content is returned as it is."""
    content = message.content
    if isinstance(content, str):
        if not content:
            return message
        blocks: list[Any] = [{"type": "text", "text": content, "cache_control": dict(control)}]
    elif isinstance(content, list) and content:
        last = content[-1]
        last = {"type": "text", "text": last} if isinstance(last, str) else dict(last)
        blocks = [*content[:-1], {**last, "cache_control": dict(control)}]
    else:
        return message
    return message.model_copy(update={"content": blocks})


def marked(messages: Sequence[BaseMessage], points: Sequence[int], control: Mapping[str, Any]) -> list[BaseMessage]:
    """``messages`` with the messages at ``points`` marked; the last message is left to the
    model, which marks it itself."""
    out = list(messages)
    for i in points:
        if 0 <= i < len(out) - 1:
            out[i] = with_mark(out[i], control)
    return out
