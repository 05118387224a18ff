"""Tokens the model receives that are not history messages: system prompt and tool schemas.

FlexA-Mem must fit the whole call into the budget, so these go to the core as
``extra_tokens``. Tool schemas are counted as the OpenAI function JSON that
``bind_tools`` sends for most providers; a provider-native tool given as a dict is
counted as that dict.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from .convert import to_core_message

if TYPE_CHECKING:
    from flexamem_core import FlexAMem


def tool_schema_text(tool: Any) -> str:
    """The JSON schema text of one tool as sent to the model."""
    if isinstance(tool, dict):
        spec: Any = tool
    else:
        try:
            spec = convert_to_openai_tool(tool)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"cannot read the schema of tool {tool!r}: {exc}") from exc
    return json.dumps(spec, ensure_ascii=False, separators=(",", ":"), default=str)


def tool_tokens(mem: FlexAMem, tools: Sequence[Any] | None) -> int:
    """Tokens of all tool schemas."""
    return sum(mem.tokenizer.count(tool_schema_text(t)) for t in (tools or ()))


def as_system_message(system_prompt: str | BaseMessage | None) -> SystemMessage | None:
    """Normalise a system prompt given as text or message (``None`` stays ``None``)."""
    if system_prompt is None or system_prompt == "":
        return None
    if isinstance(system_prompt, SystemMessage):
        return system_prompt
    if isinstance(system_prompt, str):
        return SystemMessage(content=system_prompt)
    if isinstance(system_prompt, BaseMessage):
        return SystemMessage(content=system_prompt.content)
    raise TypeError(f"system_prompt must be str or SystemMessage, got {type(system_prompt).__name__}")


def extra_tokens(mem: FlexAMem, system_prompt: str | BaseMessage | None, tools: Sequence[Any] | None) -> int:
    """Tokens of the system prompt (as a message) plus the tool schemas."""
    system = as_system_message(system_prompt)
    tokens = tool_tokens(mem, tools)
    if system is None:
        return tokens
    core = to_core_message(system)
    # The marginal cost of one more message, so the request overhead is not counted twice.
    return tokens + mem.count_messages([core, core]) - mem.count_messages([core])
