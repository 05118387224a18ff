"""Standard ``logging`` under the ``flexamem`` logger: what the memory did, never printed.

Every call whose history is over the budget logs one INFO line (how the request was made:
render, extend or append; tokens sent, memory tokens, units by resolution, milliseconds);
a history that fits and passes through logs at DEBUG, as do model loads' details. The library
adds no handler (``logging.NullHandler`` only), so nothing appears unless the
application configures logging, e.g. ``logging.basicConfig(level=logging.INFO)``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

logger = logging.getLogger("flexamem")
logger.addHandler(logging.NullHandler())

_warned: set[str] = set()
_warned_lock = threading.Lock()

F = TypeVar("F", bound=Callable[..., Any])


def warn_once(key: str, message: str, *args: Any, log: logging.Logger = logger) -> bool:
    """Log ``message`` at WARNING the first time ``key`` is seen in this process; True if logged."""
    with _warned_lock:
        if key in _warned:
            return False
        _warned.add(key)
    log.warning(message, *args)
    return True


def resolutions(report: Mapping[str, Any]) -> dict[str, int]:
    """Old units of a render report counted by resolution (raw, excerpt, record, merged, hidden),
    those with none left out."""
    return {res: n for res, n in (report.get("resolutions") or {}).items() if n}


def describe(rendered: Any, ms: float, namespace: str) -> tuple[int, str, tuple[Any, ...]]:
    """The level and %-format line of one render (INFO when the history was over the budget)."""
    report = rendered.report or {}
    step = (report.get("cache") or {}).get("step", "render")
    if rendered.passthrough:
        return logging.DEBUG, "render %s: passthrough, %d tokens (budget %s), %.1f ms", (
            namespace, rendered.tokens, report.get("budget"), ms)
    return logging.INFO, "render %s: %s, %d tokens (budget %s), memory %d tokens, units %s, %.1f ms", (
        namespace, step, rendered.tokens, report.get("budget"), report.get("memory_tokens", 0),
        resolutions(report), ms)


def logged_render(method: F) -> F:
    """Decorate a render method so that every call is timed and logged under ``flexamem``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        rendered = method(self, *args, **kwargs)
        # Described only when the line will be emitted.
        if logger.isEnabledFor(logging.DEBUG if rendered.passthrough else logging.INFO):
            level, fmt, values = describe(rendered, (time.perf_counter() - start) * 1000,
                                          str(kwargs.get("namespace", "default")))
            logger.log(level, fmt, *values)
        return rendered

    return wrapper  # type: ignore[return-value]
