"""What prompt caching allows at all on a trajectory: the floor of the cost per call and the
ceiling of the cached share, for every method that keeps its fixed prompt and shows each new
step verbatim.

A model call's new step (the assistant message the previous call produced and the
observations after it) was in no earlier request, so no provider has it cached: it is billed
as new (``NEW_PRICE``) whatever the method does with the rest of its room. Over the calls the
evaluation measures (history over B_bar), with its counter and price model:

- the cheapest request is the fixed prompt (cached) and the new step (new):
  ``CACHED_PRICE x fixed + NEW_PRICE x new`` per call (:attr:`CacheBounds.cost_floor`);
- the most cached request fills B_bar with all but the new step cached:
  ``1 - sum(new) / sum(B_bar)`` (:attr:`CacheBounds.cached_share_ceiling`).

A method that drops its task (``langchain-trim``) or cuts the newest step is not bound by
them. ``tests/benchmarks/bench_cache_bounds.py`` prints both beside truncation's figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flexamem_core.cache.prefix import CACHED_PRICE, NEW_PRICE
from flexamem_core.model.messages import Message
from flexamem_core.request.counting import PER_REQUEST

from .actions import trajectory_targets
from .methods.base import Env, split_prefix


@dataclass(frozen=True)
class StepBound:
    """One measured call: its fixed prompt and its new step, in tokens as a request counts them."""

    step: int
    fixed: int
    new: int


@dataclass(frozen=True)
class CacheBounds:
    """The bounds over the measured calls of some trajectories at one budget."""

    budget: int
    b_bar: int
    calls: int
    fixed_mean: float
    new_step_mean: float
    #: Mean over the calls of ``CACHED_PRICE x fixed + NEW_PRICE x new``.
    cost_floor: float
    #: ``1 - sum(new) / (calls x B_bar)``.
    cached_share_ceiling: float


def step_bounds(env: Env, messages: Sequence[Message], budget: int) -> list[StepBound]:
    """The fixed prompt and new step of every call whose history exceeds B_bar."""
    b_bar = env.effective(budget)
    messages = list(messages)
    fixed = env.count(split_prefix(messages)[0])
    out: list[StepBound] = []
    previous: int | None = None
    for target in trajectory_targets(messages):
        end = target.message_index
        start = end if previous is None else previous
        previous = end
        if env.count(messages[:end]) <= b_bar:
            continue
        # The new messages as a request counts them, less the request's own overhead.
        new = env.count(messages[start:end]) - PER_REQUEST if end > start else 0
        out.append(StepBound(target.step, fixed, new))
    return out


def cache_bounds(env: Env, trajectories: Iterable[Sequence[Message]], budget: int) -> CacheBounds:
    """Both bounds at ``budget`` over the measured calls of ``trajectories`` (pooled, as the
    evaluation pools ``cost_per_call`` and ``cached_prefix_share``)."""
    b_bar = env.effective(budget)
    steps = [s for messages in trajectories for s in step_bounds(env, messages, budget)]
    n = len(steps)
    if n == 0:
        return CacheBounds(budget, b_bar, 0, 0.0, 0.0, 0.0, 1.0)
    fixed = sum(s.fixed for s in steps)
    new = sum(s.new for s in steps)
    return CacheBounds(budget, b_bar, n, fixed / n, new / n, (CACHED_PRICE * fixed + NEW_PRICE * new) / n,
                       1.0 - new / (n * b_bar))
