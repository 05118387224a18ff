"""FlexA-Mem for mini-swe-agent: every model query sees the rendered memory.

* :class:`FlexAMemModel`: a model class (``model.model_class`` / ``--model-class
  flexamem_minisweagent.FlexAMemModel``) wrapping any mini-swe-agent model; works with
  ``mini``, ``mini-extra swebench`` and any agent class.
* :class:`FlexAMemAgent`: the default agent with the wrapper built in, for Python users.
* ``flexamem replay TRAJ.json --budget 8000``: what a saved run would have shown its model.

Names are imported on first use, so ``flexamem replay`` does not import mini-swe-agent
(whose import prints a banner on stdout) unless it needs its tool schemas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import FlexAMemAgent
    from .convert import CODEC, ConvertedHistory, MiniSweAgentCodec, is_memory_dict, to_core, to_host
    from .model import FlexAMemModel
    from .settings import FlexAMemSettings

_EXPORTS = {
    "CODEC": ".convert",
    "ConvertedHistory": ".convert",
    "MiniSweAgentCodec": ".convert",
    "FlexAMemAgent": ".agent",
    "FlexAMemModel": ".model",
    "FlexAMemSettings": ".settings",
    "is_memory_dict": ".convert",
    "to_core": ".convert",
    "to_host": ".convert",
}

__all__ = [
    "CODEC",
    "ConvertedHistory",
    "FlexAMemAgent",
    "FlexAMemModel",
    "FlexAMemSettings",
    "MiniSweAgentCodec",
    "is_memory_dict",
    "to_core",
    "to_host",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
