"""The host boundary: what every framework adapter shares, so an adapter is a codec and a hook.

- :mod:`.marker`: the one mark of the memory message (``mark``, ``is_marked``, ``MEMORY_ID``);
- :mod:`.wire`: the JSON a request carries (tool calls, tool schemas), written one way;
- :mod:`.tool_schemas`: tokens of the tool schemas a request carries;
- :mod:`.budget`: the one budget check and :class:`BudgetError`;
- :mod:`.codec`: the :class:`HostCodec` protocol an adapter implements;
- :mod:`.boundary`: :func:`render_host` / :func:`arender_host`, one render, sync and async;
- :mod:`.defaults`: the one budget rule (share of the input window, fallback, unit cap).

Names are imported on first use: the core's own low-level modules use the marker, the wire
form and the error without loading the boundary.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..request.budget import BudgetError, check_budget, check_extra_tokens, check_room
    from ..request.marker import MEMORY_ID, MEMORY_KEY, MEMORY_VALUE, is_marked, mark
    from ..request.wire import tool_call_wire, tool_calls_json, wire_json
    from .boundary import HostRender, arender_host, extra_tokens_of, render_host
    from .codec import Converted, HostCodec, ToolSchemaCodec
    from .defaults import (
        FALLBACK_BUDGET,
        INPUT_SHARE,
        UNITS_PER_BUDGET,
        check_fraction,
        config_for_budget,
        default_budget,
        window_budget,
    )
    from .tool_schemas import tool_schema_tokens, tool_schemas

_EXPORTS = {
    "HostRender": ".boundary", "arender_host": ".boundary", "extra_tokens_of": ".boundary",
    "render_host": ".boundary",
    "BudgetError": "..request.budget", "check_budget": "..request.budget",
    "check_extra_tokens": "..request.budget", "check_room": "..request.budget",
    "Converted": ".codec", "HostCodec": ".codec", "ToolSchemaCodec": ".codec",
    "FALLBACK_BUDGET": ".defaults", "INPUT_SHARE": ".defaults", "UNITS_PER_BUDGET": ".defaults",
    "check_fraction": ".defaults", "config_for_budget": ".defaults", "default_budget": ".defaults",
    "window_budget": ".defaults",
    "MEMORY_ID": "..request.marker", "MEMORY_KEY": "..request.marker", "MEMORY_VALUE": "..request.marker",
    "is_marked": "..request.marker", "mark": "..request.marker",
    "tool_schema_tokens": ".tool_schemas", "tool_schemas": ".tool_schemas",
    "tool_call_wire": "..request.wire", "tool_calls_json": "..request.wire", "wire_json": "..request.wire",
}

__all__ = [
    "FALLBACK_BUDGET",
    "INPUT_SHARE",
    "MEMORY_ID",
    "MEMORY_KEY",
    "MEMORY_VALUE",
    "UNITS_PER_BUDGET",
    "BudgetError",
    "Converted",
    "HostCodec",
    "HostRender",
    "ToolSchemaCodec",
    "arender_host",
    "check_budget",
    "check_extra_tokens",
    "check_fraction",
    "check_room",
    "config_for_budget",
    "default_budget",
    "extra_tokens_of",
    "is_marked",
    "mark",
    "render_host",
    "tool_call_wire",
    "tool_calls_json",
    "tool_schema_tokens",
    "tool_schemas",
    "window_budget",
    "wire_json",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
