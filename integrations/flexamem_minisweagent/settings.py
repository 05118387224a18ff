"""The ``model.flexamem`` section of a mini-swe-agent config, and the memory it builds.

Everything FlexA-Mem needs comes through mini-swe-agent's own config route (yaml files and
``-c model.flexamem.budget=4000`` overrides). Keys the adapter does not know itself are
settings of :class:`~flexamem_core.FlexAMemConfig` (``window_share``, ``mode``, ...), so a
typo is reported by the config that owns the setting instead of being ignored.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.host import FALLBACK_BUDGET, config_for_budget


class FlexAMemSettings(BaseModel):
    """Adapter settings; unknown keys are passed on to :class:`FlexAMemConfig`."""

    model_config = ConfigDict(extra="allow", frozen=True)

    budget: int | None = Field(None, gt=0, description="context budget B of every model call, in tokens; "
                               "None: the rule every adapter shares (flexamem_core.host.defaults), from "
                               "the model's input window where litellm knows it")
    namespace: str | None = Field(
        None, description="fixed memory namespace; default: a fresh one for every task the model is given")
    namespace_prefix: str = Field("mswea", description="prefix of the namespaces made per task")
    tool_schema_tokens: int | None = Field(
        None, ge=0, description="tokens of the tool schemas sent with each call; None: the bash tool of "
                                "the inner model class (0 for text-based models)")
    report: Literal["full", "summary"] = Field(
        "full", description="render report in each response's extra: full (per unit) or summary")
    store: str | None = Field(None, description="store URL for flexamem_core.stores.open_store; None: in memory")
    writer_model: str | None = Field(
        None, description="litellm model name of an LLM record writer; None: the rule writer (no LLM)")
    writer_model_kwargs: dict[str, Any] = Field(default_factory=dict)

    def core_config(self, budget: int | None = None) -> FlexAMemConfig:
        """The FlexAMemConfig of these settings for ``budget`` (else ``flexamem.budget``, else the
        shared fallback), unit sizes sized for it by the shared rule; raises pydantic's error on
        unknown keys."""
        # mini-swe-agent's user messages after the task are observations or format errors,
        # never a new human turn, so the newest one is not pinned outside the window.
        extra = {"pin_user_turn": False, **(self.model_extra or {})}
        return config_for_budget(budget or self.budget or FALLBACK_BUDGET, **extra)


class LitellmChat:
    """A ``list[dict] -> str`` chat callable on litellm that adds up its own dollar cost.

    Used as the LLM record writer so that what FlexA-Mem spends is reported in every
    response's ``extra`` and counted by the agent's cost limit.
    """

    def __init__(self, model_name: str, model_kwargs: dict[str, Any] | None = None) -> None:
        self.model_name = model_name
        self.model_kwargs = dict(model_kwargs or {})
        self.cost = 0.0
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        import litellm

        response = litellm.completion(model=self.model_name, messages=messages, **self.model_kwargs)
        try:
            cost = float(litellm.cost_calculator.completion_cost(response, model=self.model_name) or 0.0)
        except Exception:  # unknown price: the call still counts, at zero dollars
            cost = 0.0
        with self._lock:
            self.cost += cost
            self.calls += 1
        return str(response.choices[0].message.content or "")


def build_memory(settings: FlexAMemSettings, budget: int | None = None) -> tuple[FlexAMem, LitellmChat | None]:
    """A FlexAMem for these settings, and the chat callable whose cost must be reported."""
    config = settings.core_config(budget)
    store = None
    if settings.store:
        from flexamem_core.stores import open_store

        store = open_store(settings.store)
    chat = None
    writer = None
    if settings.writer_model:
        from flexamem_core.write.writers import LLMRecordWriter

        chat = LitellmChat(settings.writer_model, settings.writer_model_kwargs)
        tuning = config.tuning
        writer = LLMRecordWriter(chat, record_words=tuning.record_words, merged_words=tuning.merged_record_words,
                                 merged_cut_words=tuning.merged_record_cut_words)
    return FlexAMem(config, store=store, writer=writer), chat
