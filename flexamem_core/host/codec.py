"""What an adapter writes for its framework: a codec between its messages and the core's.

The core renders :class:`~flexamem_core.Message` lists; a framework has its own message
type. A codec reads a host history into core messages (never mutating it) and maps the
rendered messages back: the host's own objects for what is shown unchanged, new host
messages for the memory message and for copies the core made (cut, cleaned, re-paired).
What it needs to map back (the originals, a style) travels in its ``Converted`` value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..model.messages import Message


class Converted(Protocol):
    """A host history read into core messages, plus whatever the codec maps back with."""

    @property
    def messages(self) -> Sequence[Message]: ...


H = TypeVar("H")
C = TypeVar("C", bound=Converted)


class HostCodec(Protocol[H, C]):
    """Converts one framework's message list to core messages and back."""

    def to_core(self, messages: Sequence[H]) -> C:
        """The history as core messages (ids kept: ingestion is keyed by them)."""
        ...

    def to_host(self, rendered: Sequence[Message], converted: C) -> list[H]:
        """The rendered messages as host messages (the originals wherever they are unchanged)."""
        ...


@runtime_checkable
class ToolSchemaCodec(Protocol):
    """A codec that also reads the framework's tool objects (optional)."""

    def tool_schema(self, tool: Any) -> Mapping[str, Any]:
        """The schema dict the request carries for ``tool`` (OpenAI function form or a provider's)."""
        ...
