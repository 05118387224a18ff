"""The Python API: ``evaluate(dataset, data, budgets, methods)`` returns result rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .datasets import load
from .methods import METHODS, UnknownMethod, method_class
from .report import aggregate, write_outputs
from .runner import ItemResult, Spec, run, write_dumps


class EvalError(ValueError):
    """Raised for options that cannot be run (bad budget, unknown method, no items)."""


def _check(budgets: Sequence[int], methods: Sequence[str] | None) -> tuple[tuple[int, ...], tuple[str, ...]]:
    if not budgets or any((not isinstance(b, int)) or b <= 0 for b in budgets):
        raise EvalError(f"budgets must be positive integers, got {list(budgets)}")
    names = tuple(methods) if methods else tuple(METHODS)
    for name in names:
        try:
            method_class(name)
        except UnknownMethod as exc:
            raise EvalError(str(exc)) from None
    return tuple(sorted(set(budgets))), tuple(dict.fromkeys(names))


def evaluate(dataset: str, data: str | Path, budgets: Sequence[int] = (4000, 8000),
             methods: Sequence[str] | None = None, *, limit: int | None = None, workers: int = 1,
             progress: bool = False, dump_path: Path | None = None,
             config: dict[str, Any] | None = None,
             on_partial: Callable[[list[dict[str, Any]]], None] | None = None,
             threads: int | None = None) -> list[dict[str, Any]]:
    """Evaluate methods on a dataset file; returns rows ``{dataset, method, budget, metric, value, n}``.

    Trajectories also get the prompt-cache rows ``cached_prefix_share``, ``cost_per_call``
    (carrying its ``price_model``) and ``calls`` (see :mod:`flexamem_eval.report`).
    ``threads``: torch threads per process (default: the cores shared among the workers)."""
    if threads is not None and threads < 1:
        raise EvalError(f"threads must be at least 1, got {threads}")
    budgets_t, names = _check(budgets, methods)
    items = load(dataset, data, limit)
    if not items:
        raise EvalError(f"{data}: no items to evaluate")
    spec = Spec(dataset=dataset, budgets=budgets_t, methods=names, dump=dump_path is not None,
                config=dict(config or {}))

    done: list[ItemResult] = []

    def flush(res: ItemResult) -> None:
        if dump_path is not None:
            write_dumps(dump_path, [res])
            res.dumps.clear()
        done.append(res)
        if on_partial is not None:
            on_partial(aggregate(dataset, done))

    results = run(items, spec, workers=workers, progress=progress, on_result=flush, threads=threads)
    return aggregate(dataset, results)


def evaluate_to_dir(dataset: str, data: str | Path, *, budgets: Sequence[int], methods: Sequence[str] | None,
                    out: str | Path, limit: int | None = None, workers: int = 1, dump: bool = False,
                    progress: bool = True, threads: int | None = None) -> list[Path]:
    """Run :func:`evaluate` and write results.json, results.md, plots (and renders.jsonl)."""
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    dump_path = out_dir / "renders.jsonl" if dump else None
    if dump_path is not None and dump_path.exists():
        dump_path.unlink()
    order = list(methods or METHODS)

    def partial(rows: list[dict[str, Any]]) -> None:  # tables of the items done so far
        write_outputs(out_dir, rows, order, plots=False)

    rows = evaluate(dataset, data, budgets, methods, limit=limit, workers=workers, progress=progress,
                    dump_path=dump_path, on_partial=partial, threads=threads)
    paths = write_outputs(out_dir, rows, order)
    return [*paths, dump_path] if dump_path is not None else paths
