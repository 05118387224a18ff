"""Recovery strategies: what fills the room the timeline leaves (see :mod:`.base`).

Built in: ``auto`` (the default), ``unit`` and ``piece``; :mod:`.registry` finds any by name.
"""

from . import auto, piece, unit  # the built-in strategies register themselves
from .base import Extension, Plan, Query, RecallCall, RecoveryStrategy, Room
from .registry import register_strategy, registered_strategies, strategy_class

__all__ = ["Extension", "Plan", "Query", "RecallCall", "RecoveryStrategy", "Room", "auto", "piece",
           "register_strategy", "registered_strategies", "strategy_class", "unit"]
