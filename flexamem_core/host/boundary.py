"""One render of a host's messages, sync and async, for every adapter.

An adapter's hook finds the history, the tools and the thread in its framework and calls
:func:`render_host` (or :func:`arender_host`) with its codec; everything between is here,
once: the budget check, the tool-schema count, the conversion both ways and the core
render. The two twins share every step but the call of the core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..request.budget import check_budget, check_extra_tokens, check_room
from .codec import Converted, HostCodec, ToolSchemaCodec
from .incremental import memo_of
from .tool_schemas import tool_schema_tokens, tool_schemas

if TYPE_CHECKING:
    from ..memory import FlexAMem
    from ..request.rendered import Rendered

H = TypeVar("H")
C = TypeVar("C", bound=Converted)

#: A namespace, or how to find it from the converted history (mini-swe-agent: per task).
NamespaceFor = str | Callable[[Any], str]


@dataclass(frozen=True)
class HostRender(Generic[H]):
    """What one render produced: the host messages to send and the core's render.

    ``rendered`` is ``None`` only for an empty history (nothing to render or send)."""

    messages: list[H]
    rendered: Rendered | None
    namespace: str

    @property
    def report(self) -> dict[str, Any]:
        """The core's JSON-serialisable render report (what was shown, at which resolution, why)."""
        return self.rendered.report if self.rendered is not None else {}


@dataclass(frozen=True)
class _Call(Generic[H, C]):
    """A checked, converted call, ready for the core."""

    codec: HostCodec[H, C]
    converted: C
    namespace: str
    options: dict[str, Any] = field(default_factory=dict)

    def done(self, rendered: Rendered) -> HostRender[H]:
        return HostRender(self.codec.to_host(rendered.messages, self.converted), rendered, self.namespace)


def extra_tokens_of(mem: FlexAMem, codec: object, tools: Iterable[Any] | None, extra_tokens: int = 0) -> int:
    """``extra_tokens`` plus the tokens of the tool schemas the request carries."""
    schema_of = codec.tool_schema if isinstance(codec, ToolSchemaCodec) else None
    return check_extra_tokens(extra_tokens) + tool_schema_tokens(tool_schemas(tools, schema_of), mem.tokenizer)


def _prepare(mem: FlexAMem, codec: HostCodec[H, C], messages: Sequence[H], namespace: NamespaceFor,
             budget: int | None, query: str | None, tools: Iterable[Any] | None,
             extra_tokens: int) -> _Call[H, C]:
    budget = check_budget(budget)
    extra = extra_tokens_of(mem, codec, tools, extra_tokens)
    check_room(budget if budget is not None else mem.config.budget, extra)
    converted = memo_of(mem).convert(codec, messages)
    ns = namespace(converted) if callable(namespace) else namespace
    return _Call(codec, converted, ns, {"namespace": ns, "budget": budget, "query": query, "extra_tokens": extra})


def render_host(mem: FlexAMem, codec: HostCodec[H, C], messages: Sequence[H], *, namespace: NamespaceFor,
                budget: int | None = None, query: str | None = None, tools: Iterable[Any] | None = None,
                extra_tokens: int = 0) -> HostRender[H]:
    """Render a host history for one model call; the host's list and messages are not touched.

    ``tools`` are what the request carries next to the messages (dicts, or objects the codec's
    ``tool_schema`` reads); ``extra_tokens`` anything else it adds (a system prompt sent apart).
    """
    call = _prepare(mem, codec, messages, namespace, budget, query, tools, extra_tokens)
    if not call.converted.messages:
        return HostRender([], None, call.namespace)
    return call.done(mem.render(list(call.converted.messages), **call.options))


async def arender_host(mem: FlexAMem, codec: HostCodec[H, C], messages: Sequence[H], *,
                       namespace: NamespaceFor, budget: int | None = None, query: str | None = None,
                       tools: Iterable[Any] | None = None, extra_tokens: int = 0) -> HostRender[H]:
    """Async twin of :func:`render_host` (the core renders in a worker thread)."""
    call = _prepare(mem, codec, messages, namespace, budget, query, tools, extra_tokens)
    if not call.converted.messages:
        return HostRender([], None, call.namespace)
    return call.done(await mem.arender(list(call.converted.messages), **call.options))
