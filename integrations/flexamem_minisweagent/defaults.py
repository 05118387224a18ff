"""The budget of a run when ``flexamem.budget`` is not set: from the model's config.

mini-swe-agent's litellm-based model classes name their model (``model_name``), and
litellm ships a local table of context windows (``litellm.model_cost``; read offline,
``LITELLM_LOCAL_MODEL_COST_MAP=True``). The budget of that input window is the rule every
adapter shares (:mod:`flexamem_core.host.defaults`), so a model gets the same budget here as
in the other frameworks. An explicit ``flexamem.budget``, or a given ``FlexAMem`` whose
config sets one, always wins; with neither, the shared fallback is used and a WARNING says
so once.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from flexamem_core import FlexAMem
from flexamem_core.host import default_budget

from .settings import FlexAMemSettings

logger = logging.getLogger("flexamem.minisweagent")


def known_input_tokens(model_name: str) -> int | None:
    """The input window of a model litellm knows, without importing litellm for models that
    do not use it (a slow import) and without its stdout notices for unknown names."""
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
    """The budget of every call: explicit, else from the model config, else the logged fallback."""
    if settings.budget is not None:
        return settings.budget
    if memory is not None and "budget" in memory.config.model_fields_set:
        return memory.config.budget
    model_name = str(getattr(getattr(inner, "config", None), "model_name", "") or "")
    return default_budget(known_input_tokens(model_name), adapter="minisweagent",
                          model=f"model {model_name or type(inner).__name__!r}",
                          hint="set model.flexamem.budget", log=logger)
