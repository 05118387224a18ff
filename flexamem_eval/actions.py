"""Where a trajectory's actions, observations and task are, in mini-swe-agent or tool format."""

from __future__ import annotations

import re
from collections.abc import Sequence

from flexamem_core import Message

from .metrics import NEAR_OBSERVATIONS, StepTarget, step_targets

#: mini-swe-agent's own action pattern (one bash block per assistant message).
BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)


def action_text(message: Message) -> str:
    """The command of a bash block, or the arguments of the tool calls, of an assistant message."""
    parts = [m.strip() for m in BASH_BLOCK.findall(message.text)]
    parts.extend(call.arguments for call in message.tool_calls)
    return "\n".join(p for p in parts if p)


def task_index(messages: Sequence[Message]) -> int:
    """Index of the task: the first user message."""
    for i, m in enumerate(messages):
        if m.role == "user":
            return i
    raise ValueError("trajectory has no user message (task)")


def trajectory_targets(messages: Sequence[Message], near: int = NEAR_OBSERVATIONS) -> list[StepTarget]:
    """The :class:`StepTarget` of every step: observations are the non-assistant messages after
    the task; a reused detail in one of the ``near`` newest observations before its action is near."""
    t = task_index(messages)
    task = messages[t].text
    actions: list[tuple[int, str]] = []
    observations_before: list[str] = []
    newest_before: list[str] = []
    seen: list[str] = []
    for i, m in enumerate(messages):
        if m.role == "assistant":
            actions.append((i, action_text(m)))
            observations_before.append("\n".join(seen))
            newest_before.append("\n".join(seen[len(seen) - near:]) if near > 0 else "")
        elif i > t and m.role in ("user", "tool"):
            seen.append(m.text)
    return step_targets(task, actions, observations_before, newest_before)
