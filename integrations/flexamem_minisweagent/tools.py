"""Tokens of the tool schema a mini-swe-agent model class sends with every call.

The budget counts everything the model receives, so the bash tool schema of tool-calling
model classes is counted with the messages. Text-based classes (and every v1 model, which
put the command in a code block) send no tools.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from flexamem_core.host import tool_schema_tokens as schema_tokens

if TYPE_CHECKING:
    from flexamem_core import Tokenizer

Kind = Literal["text", "toolcall", "response"]

#: Model classes (by import path, lower case) that send no tool schema.
_TEXT_CLASSES = ("textbased", "test_models.deterministicmodel")


def _kind_of_path(path: str) -> Kind | None:
    path = path.lower()
    if any(p in path for p in _TEXT_CLASSES):
        return "text"
    if "response" in path:
        return "response"
    if path.startswith("minisweagent.models."):
        return "toolcall"
    return None


def model_kind(model_class: type | str, trajectory_format: str | None = None) -> Kind:
    """How a model class sends its actions: a class's own name or its nearest known base decides."""
    if trajectory_format == "mini-swe-agent-1":
        return "text"
    paths = ([model_class] if isinstance(model_class, str)
             else [f"{c.__module__}.{c.__qualname__}" for c in model_class.__mro__])
    for path in paths:
        kind = _kind_of_path(path)
        if kind is not None:
            return kind
    return "toolcall"


def tool_schema(model_class: type | str, trajectory_format: str | None = None) -> dict | None:
    """The tool schema a model class sends, or None for text-based classes."""
    kind = model_kind(model_class, trajectory_format)
    if kind == "text":
        return None
    if kind == "response":
        from minisweagent.models.utils.actions_toolcall_response import BASH_TOOL_RESPONSE_API

        return BASH_TOOL_RESPONSE_API
    from minisweagent.models.utils.actions_toolcall import BASH_TOOL

    return BASH_TOOL


def tool_schema_tokens(model_class: type | str, tokenizer: Tokenizer, trajectory_format: str | None = None) -> int:
    """Tokens of the ``tools`` list that schema is sent in, counted by the core (0 for text-based classes)."""
    schema = tool_schema(model_class, trajectory_format)
    return schema_tokens([schema] if schema else [], tokenizer)
