"""What the harness evaluates: conversations with questions, and agent trajectories.

Loaders turn each upstream format into these frozen records, so methods and metrics never
see a dataset's own layout. Every conversation turn carries ``metadata["turn"]`` (its id),
``["session"]`` and ``["date"]`` so that evidence can be located in any rendered context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from flexamem_core import Message


@dataclass(frozen=True)
class Question:
    """One question asked against a conversation history.

    ``evidence`` holds turn ids; ``abstention`` questions (no answer in the history) are
    counted but skipped by the evidence measures.
    """

    item_id: str
    text: str
    group: str
    evidence: tuple[str, ...] = ()
    abstention: bool = False
    answer: str = ""
    date: str | None = None


@dataclass(frozen=True)
class ConversationItem:
    """A conversation history and the questions asked against it (reader setting)."""

    history_id: str
    history: tuple[Message, ...]
    questions: tuple[Question, ...]
    turn_text: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TrajectoryItem:
    """An agent trajectory: system prompt, task, then actions and observations."""

    item_id: str
    messages: tuple[Message, ...]


Item = ConversationItem | TrajectoryItem


def turn_message(text: str, role: str, turn: str, session: str, date: str | None,
                 name: str | None = None) -> Message:
    """A conversation turn with the metadata the metrics and the reader units rely on."""
    meta = {"session": session, "turn": turn}
    if date:
        meta["date"] = date
    return Message(role=role, content=text, id=turn, name=name, metadata=meta)  # type: ignore[arg-type]
