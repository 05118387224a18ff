"""What one call produced, typed, and its report.

The pipeline, the cache-stable steps and the facade pass an :class:`Outcome` along; the
JSON-serialisable report a user reads (``Rendered.report``) is built from it once, when the
call returns (:meth:`Outcome.rendered`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..model.messages import Message
from ..request.rendered import Rendered


@dataclass(frozen=True)
class CacheStep:
    """How a cache-stable request was made: ``append``, ``extend``, ``compact`` or ``render``."""

    step: str
    appended: bool
    reused_prefix_tokens: int | None = None
    appended_messages: int | None = None
    extended_units: int | None = None
    recovered_units: int | None = None
    #: A compaction: the characters of the previous memory text it kept (its leading records).
    kept_memory_chars: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step}
        for key in ("extended_units", "recovered_units", "kept_memory_chars"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out["appended"] = self.appended
        if self.appended_messages is not None:
            out["appended_messages"] = self.appended_messages
        if self.reused_prefix_tokens is not None:
            out["reused_prefix_tokens"] = self.reused_prefix_tokens
        return out


@dataclass(frozen=True)
class Report:
    """Everything a call reports. A history that fits passes through (``passthrough``) and
    reports only the first fields; a rendered request reports them all."""

    passthrough: bool
    budget: int
    total_tokens: int
    pairing_repairs: int
    sanitised_messages: int
    mode: str = ""
    history: str = ""
    effective_budget: int = 0
    prompt_tokens: int = 0
    window_tokens: int = 0
    window_units: int = 0
    #: Old units the memory covers (the head's included).
    old_units: int = 0
    newest_unit_cut_messages: int = 0
    #: Messages of the recent window as sent, None where a part was cut or repaired.
    window_messages: int | None = None
    newest_unit_dropped_steps: int = 0
    pinned_turn_cut_messages: int = 0
    allowance: int = 0
    reference_allowance: int = 0
    memory_tokens: int = 0
    unused_allowance: int = 0
    spent: dict[str, int] | None = None
    #: Rows of the old units this call did something with, and the old units as timeline runs
    #: ``[start, end, resolution]`` (:mod:`flexamem_core.recall.report`).
    units: list[dict[str, Any]] = field(default_factory=list)
    unit_runs: list[list[Any]] = field(default_factory=list)
    resolutions: dict[str, int] | None = None
    pieces: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: int | None = None
    recovered_dropped: int = 0
    #: What the recovery strategy said, under its report key.
    strategy: tuple[str, dict[str, Any]] | None = None
    #: Old units (and their messages) kept verbatim ahead of the memory.
    head_units: int | None = None
    head_messages: int | None = None
    task_cut_messages: int | None = None
    #: The budget a cache-stable fresh render was made for (room left to append).
    render_budget: int | None = None
    cache: CacheStep | None = None
    newest_step: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON-serialisable report."""
        if self.passthrough:
            out: dict[str, Any] = {"passthrough": True, "budget": self.budget, "total_tokens": self.total_tokens,
                                   "pairing_repairs": self.pairing_repairs,
                                   "sanitised_messages": self.sanitised_messages}
            if self.llm_calls is not None:
                out["llm_calls"] = self.llm_calls
        else:
            out = self._rendered_dict()
        for key in ("head_units", "head_messages", "task_cut_messages", "render_budget"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.cache is not None:
            out["cache"] = self.cache.as_dict()
        if self.newest_step is not None:
            out["newest_step"] = self.newest_step
        return out

    def _rendered_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "passthrough": False, "mode": self.mode, "history": self.history, "budget": self.budget,
            "effective_budget": self.effective_budget, "total_tokens": self.total_tokens,
            "prompt_tokens": self.prompt_tokens, "window_tokens": self.window_tokens,
            "window_units": self.window_units, "old_units": self.old_units,
            "newest_unit_cut_messages": self.newest_unit_cut_messages, "window_messages": self.window_messages,
            "pairing_repairs": self.pairing_repairs, "newest_unit_dropped_steps": self.newest_unit_dropped_steps,
            "pinned_turn_cut_messages": self.pinned_turn_cut_messages, "sanitised_messages": self.sanitised_messages,
            "allowance": self.allowance, "reference_allowance": self.reference_allowance,
            "memory_tokens": self.memory_tokens, "unused_allowance": self.unused_allowance,
            "spent": dict(self.spent or {}), "units": [dict(r) for r in self.units],
            "unit_runs": [list(r) for r in self.unit_runs], "resolutions": dict(self.resolutions or {}),
            "pieces": [dict(p) for p in self.pieces], "llm_calls": self.llm_calls or 0,
            "recovered_dropped": self.recovered_dropped,
        }
        if self.strategy is not None:
            out[self.strategy[0]] = self.strategy[1]
        return out


@dataclass(frozen=True)
class Outcome:
    """The request of one call: what to send, the memory text, its exact count and the report."""

    messages: list[Message]
    memory_text: str | None
    tokens: int
    report: Report
    #: (characters, old units) of the memory text's leading record lines, before any recovered
    #: text: a compaction keeps them as they were sent (:mod:`flexamem_core.cache.extend`).
    records: tuple[int, int] | None = None

    @property
    def passthrough(self) -> bool:
        return self.report.passthrough

    def with_report(self, **changes: Any) -> Outcome:
        return replace(self, report=replace(self.report, **changes))

    def rendered(self) -> Rendered:
        """The public result, its report built now."""
        return Rendered(list(self.messages), self.memory_text, self.tokens, self.report.as_dict(),
                        passthrough=self.passthrough)
