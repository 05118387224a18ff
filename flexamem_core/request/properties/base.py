"""What every message property is: a named rule with a check and an enforcement.

Each invariant of what FlexA-Mem sends is one small class (the style of the OpenHands
SDK's ``context/view/properties``): ``problem`` says what is wrong with a request (None
when the rule holds) and ``enforce`` returns a copy that obeys it, with the number of
fixes made. The caller's messages are never changed; enforcing a rule that already holds
returns the same message objects.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...model.messages import Message

#: The result a call without one gets, and the mark of a result that answers no call.
NO_RESULT = "[no result was recorded for this tool call]"
ORPHAN_MARK = "[tool result without a matching call]"
#: Ids FlexA-Mem gives calls that have none (or a repeated one) start with this.
CALL_ID_PREFIX = "flexamem_call_"


@dataclass(frozen=True)
class Context:
    """What some checks need besides the request: the history it was made from and the report."""

    source: Sequence[Message] = ()
    report: Mapping[str, Any] = field(default_factory=dict)
    kind: str = "agent"


class MessageProperty(ABC):
    """One invariant of a request sent to a model."""

    name: ClassVar[str]
    rule: ClassVar[str]

    @abstractmethod
    def problem(self, messages: Sequence[Message], context: Context | None = None) -> str | None:
        """Why ``messages`` break this rule, or None when they obey it."""

    @abstractmethod
    def enforce(self, messages: Sequence[Message]) -> tuple[list[Message], int]:
        """A copy of ``messages`` that obeys this rule, and how many fixes it took."""


def spans(messages: Sequence[Message]) -> list[range]:
    """The request cut before every assistant message: a step is its call and what follows."""
    starts = [i for i, m in enumerate(messages) if m.role == "assistant"]
    bounds = ([0] if not starts or starts[0] != 0 else []) + starts + [len(messages)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def call_ids(message: Message) -> list[str | None]:
    """The ids of an assistant message's tool calls (empty for any other message)."""
    return [c.id for c in message.tool_calls] if message.role == "assistant" else []
