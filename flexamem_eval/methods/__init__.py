"""Registry of the evaluated methods, by their exact names (imported on use)."""

from __future__ import annotations

import importlib
from typing import Any

from .base import Env, Method

#: name -> (module, class); the order is the order of tables and plots.
METHODS: dict[str, tuple[str, str]] = {
    "flexamem-auto": ("ours", "FlexAMemAuto"),
    "flexamem-unit": ("ours", "FlexAMemUnit"),
    "flexamem-unit-per-call": ("ours", "FlexAMemUnitPerCall"),
    "flexamem-piece": ("ours", "FlexAMemPiece"),
    "timeline-only": ("ours", "TimelineOnly"),
    "flexamem-unit-no-excerpts": ("ours", "NoExcerpts"),
    "random-candidates": ("ours", "RandomCandidates"),
    "full": ("recency", "Full"),
    "truncation": ("recency", "Truncation"),
    "masking": ("masking", "Masking"),
    "masking-log": ("masking", "MaskingLog"),
    "piece-retrieval": ("retrieval", "PieceRetrieval"),
    "unit-retrieval": ("retrieval", "UnitRetrieval"),
    "amem": ("amem", "AMem"),
    "amem-fit-or-degrade": ("amem", "AMemFitOrDegrade"),
    "pamer": ("pamer", "PaMER"),
    "pamer-plus": ("pamer", "PaMERPlus"),
    "langchain-trim": ("peers", "LangChainTrim"),
    "langchain-trim-task": ("peers", "LangChainTrimTask"),
    "llamaindex-buffer": ("peers", "LlamaIndexBuffer"),
}


class UnknownMethod(ValueError):
    """Raised for a method name that is not in :data:`METHODS`."""


#: Any recovery strategy the core knows runs as ``flexamem-<its name>`` (:func:`strategy_method`).
STRATEGY_PREFIX = "flexamem-"


def method_class(name: str) -> type[Method]:
    if name in METHODS:
        module, cls = METHODS[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    if name.startswith(STRATEGY_PREFIX):
        from flexamem_core import registered_strategies

        if name.removeprefix(STRATEGY_PREFIX) in registered_strategies():
            from .ours import strategy_method

            return strategy_method(name.removeprefix(STRATEGY_PREFIX))
    raise UnknownMethod(f"unknown method {name!r}; expected one of {list(METHODS)}, or flexamem-<strategy> for a "
                        "registered recovery strategy")


def make_method(name: str, env: Env, shared: dict[str, Any]) -> Method:
    """A fresh instance of a method for one item (``shared`` is per item)."""
    return method_class(name)(env, shared)


__all__ = ["METHODS", "Env", "Method", "UnknownMethod", "make_method", "method_class"]
