"""``FlexAMemModel``: any mini-swe-agent model, queried with the FlexA-Mem rendered context.

mini-swe-agent's agent hands its whole message list to ``model.query`` on every step. This
wrapper renders that list for the budget right there and queries the real ("inner")
model with the rendered list, so the agent's own list, and the saved trajectory, stay the
complete linear history. It is selected like any model class::

    model:
      model_class: flexamem_minisweagent.FlexAMemModel
      inner_model_class: litellm          # any mini-swe-agent model class or import path
      model_name: anthropic/claude-sonnet-4-5-20250929
      flexamem: {budget: 16000}

which also works for ``mini-extra swebench --model-class flexamem_minisweagent.FlexAMemModel``
(its batch runner builds a fresh model per instance). Every response's ``extra`` gains a
``flexamem`` entry (render report, tokens, namespace, FlexA-Mem's own cost) and its
``cost`` includes FlexA-Mem's own LLM spend, so the run's cost limits count it.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from minisweagent import Model
from minisweagent.exceptions import FormatError
from minisweagent.models import GLOBAL_MODEL_STATS, get_model_class
from minisweagent.utils.serialize import recursive_merge

from flexamem_core import FlexAMem
from flexamem_core.host import render_host
from flexamem_core.stores import check_namespace

from .cache_marks import CacheMarks
from .convert import CODEC, ConvertedHistory
from .defaults import run_budget
from .settings import FlexAMemSettings, LitellmChat, build_memory
from .tools import tool_schema_tokens


def _class_path(obj: Any) -> str:
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report without its per-unit lists (for ``report: summary``)."""
    return {k: v for k, v in report.items() if not isinstance(v, (list, tuple))}


class FlexAMemModel:
    """A mini-swe-agent model that renders the history with FlexA-Mem before each query.

    Config route: ``FlexAMemModel(inner_model_class="litellm", flexamem={...}, **inner_config)``
    builds the inner model from the remaining keys. Python route:
    ``FlexAMemModel(inner=some_model, flexamem={...})`` wraps a model object. ``memory``
    may pass a ready :class:`FlexAMem` (for example one on a shared store).
    """

    def __init__(self, *, inner: Model | None = None, memory: FlexAMem | None = None,
                 inner_model_class: str = "", flexamem: Mapping[str, Any] | FlexAMemSettings | None = None,
                 **inner_config: Any) -> None:
        self.settings = (flexamem if isinstance(flexamem, FlexAMemSettings)
                         else FlexAMemSettings.model_validate(dict(flexamem or {})))
        if inner is None:
            cls = get_model_class(str(inner_config.get("model_name", "")), inner_model_class)
            if issubclass(cls, FlexAMemModel):
                raise ValueError("inner_model_class must be a real model class, not FlexAMemModel itself")
            inner = cls(**inner_config)
        elif inner_config or inner_model_class:
            raise ValueError("pass either inner=<model object> or the inner model's config, not both")
        self.inner: Model = inner
        self._cache_marks = CacheMarks(inner)
        self._writer_chat: LitellmChat | None = None
        self.budget = run_budget(self.settings, inner, memory)
        if memory is None:
            memory, self._writer_chat = build_memory(self.settings, self.budget)
        self.memory = memory
        self.namespace: str | None = self.settings.namespace
        check_namespace(self.namespace or f"{self.settings.namespace_prefix}-0")
        self._task_namespaces: dict[str, tuple[str, int]] = {}  # task key -> (namespace, history length)
        self._task_namespace: str | None = None
        self._extra_tokens: int | None = self.settings.tool_schema_tokens
        self.stats = {"queries": 0, "rendered": 0, "flexamem_cost": 0.0, "tokens_sent": 0}

    # --- the Model protocol, delegated --------------------------------------------------
    @property
    def config(self) -> Any:
        """The inner model's config (``model_name`` etc. are read from here by the runners)."""
        return self.inner.config

    def format_message(self, **kwargs: Any) -> dict:
        return self.inner.format_message(**kwargs)

    def format_observation_messages(self, message: dict, outputs: list[dict],
                                    template_vars: dict | None = None) -> list[dict]:
        return self.inner.format_observation_messages(message, outputs, template_vars)

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return self.inner.get_template_vars(**kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes not found normally: anything else of the inner model.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def serialize(self) -> dict:
        return recursive_merge(self.inner.serialize(), {
            "info": {
                "config": {
                    "model_type": _class_path(self),
                    "inner_model_type": _class_path(self.inner),
                    "flexamem": self.settings.model_dump(mode="json"),
                },
                "flexamem": {**self.stats, "namespace": self.current_namespace, "budget": self.budget},
            }
        })

    # --- rendering ------------------------------------------------------------------------
    @property
    def current_namespace(self) -> str | None:
        return self.namespace or self._task_namespace

    def namespace_for(self, converted: ConvertedHistory) -> str:
        """The fixed namespace, or one per run of a task.

        A task is recognised by its system prompt and first user message, so the batch
        runner's instances never share memories; a history shorter than the previous one
        of the same task is a new run (``agent.run`` starts the list afresh) and gets a new
        namespace too, while agents taking turns on one model keep theirs.
        """
        if self.namespace:
            return self.namespace
        head = [m for m in converted.messages[:4] if m.role in ("system", "user")][:2]
        key = hashlib.sha256(json.dumps([m.text for m in head]).encode("utf-8", "replace")).hexdigest()
        known = self._task_namespaces.get(key)
        if known is None or len(converted.messages) < known[1]:
            known = (f"{self.settings.namespace_prefix}-{key[:12]}-{uuid.uuid4().hex[:8]}", 0)
        self._task_namespaces[key] = (known[0], len(converted.messages))
        self._task_namespace = known[0]
        return known[0]

    def extra_tokens(self) -> int:
        """Tokens of the tool schemas the inner model sends along with the messages."""
        if self._extra_tokens is None:
            self._extra_tokens = tool_schema_tokens(type(self.inner), self.memory.tokenizer)
        return self._extra_tokens

    def render(self, messages: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], dict[str, Any]]:
        """The messages to send for this history, and what to record about the render."""
        start = time.perf_counter()
        cost_before = self._writer_chat.cost if self._writer_chat else 0.0
        calls_before = self._writer_chat.calls if self._writer_chat else 0
        outcome = render_host(self.memory, CODEC, messages, namespace=self.namespace_for, budget=self.budget,
                              extra_tokens=self.extra_tokens())
        rendered, host = outcome.rendered, outcome.messages
        same = rendered is not None and len(host) == len(rendered.messages)  # one host message per message
        self._cache_marks.use(rendered.cache_breakpoints() if same and rendered is not None else ())
        cost = (self._writer_chat.cost - cost_before) if self._writer_chat else 0.0
        report = outcome.report if self.settings.report == "full" else _summary(outcome.report)
        tokens = rendered.tokens if rendered is not None else 0
        passed = rendered is None or rendered.passthrough
        info = {
            "namespace": outcome.namespace,
            "budget": self.budget,
            "passthrough": passed,
            "tokens": tokens,
            "tool_schema_tokens": self.extra_tokens(),
            "messages_in": len(messages),
            "messages_sent": len(host),
            "render_seconds": round(time.perf_counter() - start, 4),
            "cost": cost,
            "llm_calls": (self._writer_chat.calls - calls_before) if self._writer_chat else 0,
            "report": report,
        }
        self.stats["queries"] += 1
        self.stats["rendered"] += 0 if passed else 1
        self.stats["flexamem_cost"] += cost
        self.stats["tokens_sent"] += tokens
        if cost > 0:
            GLOBAL_MODEL_STATS.add(cost)  # FlexA-Mem's own LLM calls count towards the global limit
        return host, info

    @staticmethod
    def _annotate(message: Mapping[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        """A copy of the model's message with the render info in ``extra`` and the cost added."""
        extra = dict(message.get("extra") or {})
        extra["flexamem"] = info
        extra["cost"] = float(extra.get("cost", 0.0) or 0.0) + info["cost"]
        return {**message, "extra": extra}

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        """Render ``messages`` (never modified) and query the inner model with the result."""
        host, info = self.render(messages)
        try:
            response = self.inner.query(list(host), **kwargs)
        except FormatError as exc:
            # The agent adds the first message (and its cost) to the trajectory.
            if exc.messages:
                exc.messages = (self._annotate(exc.messages[0], info), *exc.messages[1:])
            raise
        return self._annotate(response, info)
