"""Tokens of the tool schema a mini-swe-agent model class sends with every call.

The budget counts everything the model receives, so the bash tool schema of tool-calling
model classes is counted with the messages. Text-based classes (and every v1 model, which
put the command in a code block) send no tools.
"""

from __future__ import annotations

import json
from collections.abc import Callable

#: Model classes (by import path, lower case) that send no tool schema.
_TEXT_CLASSES = ("textbased", "test_models.deterministicmodel")


def tool_schema(class_path: str, trajectory_format: str | None = None) -> dict | None:
    """The tool schema a model class sends, or None for text-based classes."""
    path = class_path.lower()
    if trajectory_format == "mini-swe-agent-1" or any(p in path for p in _TEXT_CLASSES):
        return None
    if "response" in path:
        from minisweagent.models.utils.actions_toolcall_response import BASH_TOOL_RESPONSE_API

        return BASH_TOOL_RESPONSE_API
    from minisweagent.models.utils.actions_toolcall import BASH_TOOL

    return BASH_TOOL


def tool_schema_tokens(class_path: str, count: Callable[[str], int], trajectory_format: str | None = None) -> int:
    """Tokens of that schema as JSON (0 for text-based classes)."""
    schema = tool_schema(class_path, trajectory_format)
    return count(json.dumps(schema)) if schema else 0
