"""How much of the budget a cache-stable re-render or extension may fill: the fixed prompt plus
``stable_target`` of the rest of ``B_bar``; the rest is left for the next calls to append."""

from __future__ import annotations

import math

from ..config import FlexAMemConfig


def stable_limit(cfg: FlexAMemConfig, fixed_tokens: int) -> int:
    """Tokens a re-rendered or extended request may fill."""
    b_bar = cfg.effective_budget
    return fixed_tokens + int(cfg.tuning.stable_target * max(0, b_bar - fixed_tokens))


def stable_budget(cfg: FlexAMemConfig, fixed_tokens: int) -> int:
    """The budget whose ``B_bar`` is :func:`stable_limit` (for a fresh render)."""
    return max(1, math.ceil(stable_limit(cfg, fixed_tokens) / cfg.tuning.safety_margin))
