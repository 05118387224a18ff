"""Which FlexA-Mem namespace a LangGraph run reads and writes: its thread id.

Two threads therefore never see each other's memory. A run without a checkpointer has no
thread id and uses the explicit fallback namespace the adapter was given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from flexamem_core.stores import NamespaceError, check_namespace


def namespace_for_thread(thread_id: Any) -> str:
    """A valid namespace name for a thread id: the id itself, or a stable hash of it."""
    text = str(thread_id)
    try:
        return check_namespace(text)
    except NamespaceError:
        return "thread-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def thread_id_from_config(config: Mapping[str, Any] | None) -> str | None:
    """The ``configurable`` thread id of a RunnableConfig, if any."""
    if not config:
        return None
    configurable = config.get("configurable") or {}
    value = configurable.get("thread_id")
    return None if value in (None, "") else str(value)


def current_thread_id(runtime: Any = None, config: Mapping[str, Any] | None = None) -> str | None:
    """Thread id of the running graph: ``runtime.execution_info``, else the config, else the context."""
    info = getattr(runtime, "execution_info", None)
    thread_id = getattr(info, "thread_id", None)
    if thread_id not in (None, ""):
        return str(thread_id)
    thread_id = thread_id_from_config(config)
    if thread_id is not None:
        return thread_id
    try:
        from langgraph.config import get_config

        return thread_id_from_config(get_config())
    except RuntimeError:  # called outside a runnable context
        return None


def resolve_namespace(fallback: str, runtime: Any = None, config: Mapping[str, Any] | None = None) -> str:
    """The run's thread namespace, or ``fallback`` when the run has no thread id."""
    thread_id = current_thread_id(runtime, config)
    return namespace_for_thread(thread_id) if thread_id is not None else check_namespace(fallback)
