"""Tokens of the tool schemas a request carries, counted from the JSON it sends.

Every host sends its tools as a ``tools`` list of function schemas (OpenAI's
``{"type": "function", "function": {...}}`` or a provider's own dict); the adapter turns its
tool objects into those dicts (its codec's ``tool_schema``) and the count is taken here, once,
of the list as :func:`~flexamem_core.request.wire.wire_json` writes it (or of its schemas one
by one, whichever is more).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..request.wire import wire_json

if TYPE_CHECKING:
    from ..model.protocols import Tokenizer

#: Turns one host tool object into the schema dict the request carries.
SchemaOf = Callable[[Any], Mapping[str, Any]]


def tool_schemas(tools: Iterable[Any] | None, schema_of: SchemaOf | None = None) -> list[Mapping[str, Any]]:
    """The schema dicts of ``tools``: dicts as given, anything else through ``schema_of``."""
    out: list[Mapping[str, Any]] = []
    for tool in tools or ():
        if isinstance(tool, Mapping):
            out.append(tool)
        elif schema_of is None:
            raise TypeError(f"cannot read the schema of tool {tool!r}: pass a dict or a codec with tool_schema")
        else:
            try:
                out.append(schema_of(tool))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"cannot read the schema of tool {tool!r}: {exc}") from exc
    return out


def tool_schema_tokens(schemas: Iterable[Mapping[str, Any]] | None, tokenizer: Tokenizer) -> int:
    """Tokens of the ``tools`` list as sent (0 for none), and never fewer than its schemas
    counted one by one (token merges across the list's commas can make the list shorter)."""
    schemas = list(schemas or ())
    if not schemas:
        return 0
    return max(tokenizer.count(wire_json(schemas)), sum(tokenizer.count(wire_json(s)) for s in schemas))
