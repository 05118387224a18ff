"""Recovery strategies by name: the built-in ones, those registered at run time, and those
other installed packages declare as ``flexamem.strategies`` entry points (loaded when a
name is not otherwise known).

Adding a strategy: a class with a ``name`` and a ``plan`` (:class:`.base.RecoveryStrategy`),
then one line: ``register_strategy(MyStrategy)`` (or as a class decorator), or an entry point
``[project.entry-points."flexamem.strategies"] my-name = "my_package.module:MyStrategy"``.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from .base import RecoveryStrategy

GROUP = "flexamem.strategies"

_STRATEGIES: dict[str, type[RecoveryStrategy]] = {}


def register_strategy(cls: type[RecoveryStrategy]) -> type[RecoveryStrategy]:
    """Register a strategy class under its ``name`` (usable as a decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, RecoveryStrategy)):
        raise TypeError(f"{cls!r} is not a RecoveryStrategy subclass")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__} needs a non-empty class attribute 'name'")
    _STRATEGIES[name] = cls
    return cls


def _load_entry_points(only: str | None = None) -> None:
    for ep in entry_points(group=GROUP):
        if (only is None or ep.name == only) and ep.name not in _STRATEGIES:
            register_strategy(ep.load())


def strategy_class(name: str) -> type[RecoveryStrategy]:
    """The class registered as ``name``, or ValueError naming the registered ones."""
    if name not in _STRATEGIES:
        _load_entry_points(name)
    if name not in _STRATEGIES:
        raise ValueError(f"unknown recovery mode {name!r}; registered: {', '.join(registered_strategies())}")
    return _STRATEGIES[name]


def registered_strategies() -> list[str]:
    """Every strategy name: the built-in ones first, then those registered or installed."""
    _load_entry_points()
    return list(_STRATEGIES)
