"""The interface every recovery strategy implements, and what it is given for one call.

A render sizes the timeline of old units, then a strategy fills the room the timeline
leaves with recovered detail. A strategy answers two questions:

- :meth:`RecoveryStrategy.plan`: for a fresh render, how far the timeline is merged (its
  ``target``, and for a big newest unit how far its oldest records are hidden for this call,
  ``room_for``) and how the room it leaves is filled (``recover``);
- :meth:`RecoveryStrategy.extend`: for a cache-stable request that keeps its previous memory
  and appends records to it, what fresh detail goes at the memory's end (default: none).

Strategies are registered by name (:mod:`.registry`); ``FlexAMemConfig.mode`` names one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...index.namespace import NamespaceIndex
from ...model.protocols import Tokenizer
from ...model.schema import Note
from ..assembly import Element, MemoryRender
from ..timeline import Timeline

if TYPE_CHECKING:
    from ...config import FlexAMemConfig


@dataclass(frozen=True)
class Query:
    """What one call asks, as recovery reads it. Its vector is embedded when a strategy first
    reads it: a call whose recovery ranks nothing by meaning (a cache-stable agent request
    with nothing asked, ``mode="auto"``) puts no model call on the agent's path."""

    #: Makes the query's vector (the one model call of a render); see :attr:`vector`.
    embed: Callable[[], np.ndarray]
    #: The words that score the excerpt pieces of a unit.
    excerpt_text: str
    #: The words that score every old piece (seeds, piece recovery).
    piece_text: str
    #: What a human turn or ``query=`` of an agent step asks, in words ("" otherwise).
    focus: str

    @cached_property
    def vector(self) -> np.ndarray:
        """The query's vector, embedded on first use."""
        return self.embed()


@dataclass(frozen=True)
class RecallCall:
    """One call's inputs to a strategy: the old units' notes and the index that holds them."""

    notes: Sequence[Note]
    index: NamespaceIndex
    cfg: FlexAMemConfig
    tokenizer: Tokenizer
    query: Query
    #: The call asks a question over a history (a reader, or a call with a current turn).
    question: bool
    #: A cache-stable request: the trace is kept (not hidden for a big newest unit) and
    #: recovered units go after the timeline, so the timeline stays a stable prefix.
    stable: bool
    #: Agent calls: the text sent after the memory (the recent window), and before it (the
    #: task, the head): what old steps revealed is ranked by the first and not repeated from
    #: either (:mod:`flexamem_core.recall.revealed`).
    recent_text: str = ""
    fixed_text: str = ""


@dataclass(frozen=True)
class Room:
    """The memory's room in tokens: ``a_mem`` for the lines (the allowance less the wrapper),
    ``size_mem`` what the timeline is sized by (at least ``a_mem``: the allowance a full
    recent window leaves, so merges recur call after call), ``allowance`` for the message."""

    a_mem: int
    size_mem: int
    allowance: int


@dataclass
class Plan:
    """How a fresh render's memory is made: the timeline merged to ``target`` tokens (with
    ``room_for``, its oldest records hidden down to that for this call), then ``recover``
    fills the room it leaves. ``report`` is what the strategy says of its choice."""

    target: float
    room_for: float | None
    recover: Callable[[Timeline], MemoryRender]
    report: dict[str, Any] | None = None


@dataclass
class Extension:
    """Fresh detail for an extended memory: elements in rank order, and the strategy's report."""

    elements: list[Element] = field(default_factory=list)
    report: dict[str, Any] | None = None


class RecoveryStrategy(ABC):
    """How the room the timeline leaves is filled (see the module docstring).

    ``report_key``: the render report's key for what :meth:`plan` and :meth:`extend` say
    (None: the strategy adds nothing to the report)."""

    name: ClassVar[str]
    report_key: ClassVar[str | None] = None
    #: Whether :meth:`extend` adds detail (else an extended memory gets none, and no query is made).
    extends: ClassVar[bool] = False

    @abstractmethod
    def plan(self, call: RecallCall, room: Room) -> Plan:
        """The plan of a fresh render."""

    def extend(self, call: RecallCall, room: int, shown: set[int]) -> Extension:
        """Detail for an extended memory within ``room`` tokens, for old units not in ``shown``
        (positions already shown raw or as an excerpt). Default: none."""
        return Extension()

    def no_room(self) -> dict[str, Any] | None:
        """The report of an extension with no room (or no old unit) for detail."""
        return None

    def nothing_old(self) -> dict[str, Any] | None:
        """The report of a render with no old unit to remember."""
        return None
