"""``FlexAMemAgent``: mini-swe-agent's default agent whose every query sees FlexA-Mem.

For Python users who build the agent themselves::

    agent = FlexAMemAgent(LitellmModel(model_name=...), LocalEnvironment(), budget=16000, **agent_config)
    agent.run("Fix the failing test", instance_id="my-task-1")

It wraps the model in :class:`FlexAMemModel` (the one place where rendering happens), so
``agent.messages`` and the saved trajectory remain the complete history. It is also
selectable as ``agent.agent_class: flexamem_minisweagent.FlexAMemAgent`` with the
settings in ``agent.flexamem``; ``mini-extra swebench`` ignores the agent class, use the
model class there.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from minisweagent import Environment, Model
from minisweagent.agents.default import DefaultAgent

from flexamem_core import FlexAMem
from flexamem_core.stores import check_namespace

from .model import FlexAMemModel
from .settings import FlexAMemSettings


class FlexAMemAgent(DefaultAgent):
    """DefaultAgent with a FlexA-Mem rendered context on every model query.

    ``flexamem`` takes the same settings as the model's ``flexamem`` section; ``budget`` is
    a shortcut for ``flexamem={"budget": ...}``. A run's memory namespace is the
    ``instance_id`` passed to :meth:`run` (or the agent's ``instance_id`` attribute) plus a
    run token (two runs never share a memory), else one is made per task.
    """

    def __init__(self, model: Model, env: Environment, *, flexamem: Mapping[str, Any] | None = None,
                 budget: int | None = None, memory: FlexAMem | None = None, **kwargs: Any) -> None:
        if not isinstance(model, FlexAMemModel):
            settings = dict(flexamem or {})
            if budget is not None:
                settings["budget"] = budget
            model = FlexAMemModel(inner=model, memory=memory, flexamem=FlexAMemSettings.model_validate(settings))
        elif flexamem or budget is not None or memory is not None:
            raise ValueError("the model is already a FlexAMemModel: configure FlexA-Mem on the model")
        super().__init__(model, env, **kwargs)
        self.flexamem_model: FlexAMemModel = model

    def run(self, task: str = "", **kwargs: Any) -> dict:
        instance_id = kwargs.get("instance_id") or getattr(self, "instance_id", None)
        if instance_id and not self.flexamem_model.settings.namespace:
            namespace = f"{self.flexamem_model.settings.namespace_prefix}-{instance_id}-{uuid.uuid4().hex[:8]}"
            check_namespace(namespace)
            self.flexamem_model.namespace = namespace
        return super().run(task, **kwargs)
