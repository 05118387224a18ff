"""The budget of a run when ``flexamem.budget`` is not set: from the model's config.

mini-swe-agent's litellm-based model classes name their model (``model_name``), and
litellm ships a local table of context windows (``litellm.model_cost``; read offline,
``LITELLM_LOCAL_MODEL_COST_MAP=True``). The budget is :data:`DEFAULT_FRACTION` of that
window's input tokens. An explicit ``flexamem.budget``, or a given ``FlexAMem`` whose
config sets one, always wins; with neither, the default is used and a WARNING says so once.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.logs import warn_once

from .settings import FlexAMemSettings

logger = logging.getLogger("flexamem.minisweagent")

#: Share of the model's input window used as the budget (as for LangChain and LlamaIndex).
DEFAULT_FRACTION = 0.75


def known_input_tokens(model_name: str) -> int | None:
    """The input window of a model litellm knows, without importing litellm for models that
    do not use it (a 5 s import) and without its stdout notices for unknown names."""
    litellm = sys.modules.get("litellm")
    if litellm is None or not model_name:
        return None
    table = getattr(litellm, "model_cost", None) or {}
    for name in (model_name, model_name.split("/", 1)[-1]):
        limit = (table.get(name) or {}).get("max_input_tokens")
        if isinstance(limit, int) and limit > 0:
            return limit
    return None


def run_budget(settings: FlexAMemSettings, inner: Any, memory: FlexAMem | None = None) -> int:
    """The budget of every call: explicit, else from the model config, else the logged default."""
    if settings.budget is not None:
        return settings.budget
    if memory is not None and "budget" in memory.config.model_fields_set:
        return memory.config.budget
    model_name = str(getattr(getattr(inner, "config", None), "model_name", "") or "")
    limit = known_input_tokens(model_name)
    if limit is not None:
        return max(1, int(limit * DEFAULT_FRACTION))
    default = FlexAMemConfig().budget
    warn_once("minisweagent-default-budget",
              "FlexA-Mem: no flexamem.budget given and the context window of model %r is not known; "
              "using %d tokens (set model.flexamem.budget)", model_name or type(inner).__name__, default,
              log=logger)
    return default
