"""The message rules of every request FlexA-Mem sends, one class per invariant.

``PROPERTIES`` lists them in the order they are enforced; :func:`apply_properties` is the
one function that applies them (to a passthrough history, a rendered request, an
appended one, a reader's current turn alike) and :func:`problems` checks them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...model.messages import Message
from .answered import EveryCallAnswered
from .base import CALL_ID_PREFIX, NO_RESULT, ORPHAN_MARK, Context, MessageProperty, spans
from .call_ids import UniqueCallIds
from .follow import ResultsFollowCalls
from .newest import NewestStepUnchanged, newest_step, step_status
from .orphans import NoOrphanResults
from .sendable import SendableText, sendable
from .system import OneSystemFirst, no_inner_system, one_system

#: Every rule, in enforcement order (each later rule relies on the earlier ones).
PROPERTIES: tuple[MessageProperty, ...] = (
    SendableText(),
    OneSystemFirst(),
    UniqueCallIds(),
    EveryCallAnswered(),
    ResultsFollowCalls(),
    NoOrphanResults(),
    NewestStepUnchanged(),
)
#: The rules that change message structure (pairing and system); sanitising text is not one.
STRUCTURAL = frozenset({"one_system_first", "unique_call_ids", "every_call_answered", "results_follow_calls",
                        "no_orphan_results"})


@dataclass(frozen=True)
class Enforced:
    """A request that obeys every rule, and the fixes each rule made."""

    messages: list[Message]
    fixes: dict[str, int]

    @property
    def repairs(self) -> int:
        """Structural fixes (pairing and system messages)."""
        return sum(n for k, n in self.fixes.items() if k in STRUCTURAL)

    @property
    def sanitised(self) -> int:
        return self.fixes.get("sendable_text", 0)


def apply_properties(messages: Sequence[Message],
                     properties: Sequence[MessageProperty] = PROPERTIES) -> Enforced:
    """Enforce every rule in order; the input is never changed (copies where needed)."""
    out = list(messages)
    fixes: dict[str, int] = {}
    for prop in properties:
        out, n = prop.enforce(out)
        fixes[prop.name] = n
    return Enforced(out, fixes)


def problems(messages: Sequence[Message], context: Context | None = None,
             properties: Sequence[MessageProperty] = PROPERTIES) -> dict[str, str]:
    """Rule name -> what is wrong, for every rule ``messages`` break (empty when all hold)."""
    found = {p.name: p.problem(messages, context) for p in properties}
    return {k: v for k, v in found.items() if v is not None}


__all__ = [
    "CALL_ID_PREFIX", "NO_RESULT", "ORPHAN_MARK", "PROPERTIES", "STRUCTURAL", "Context", "Enforced",
    "EveryCallAnswered", "MessageProperty", "NewestStepUnchanged", "NoOrphanResults", "OneSystemFirst",
    "ResultsFollowCalls", "SendableText", "UniqueCallIds", "apply_properties", "newest_step", "no_inner_system",
    "one_system", "problems", "sendable", "spans", "step_status",
]
