"""The Python API: ``evaluate(dataset, data, budgets, methods)`` returns result rows."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .datasets import load
from .embedding_cache import default_cache_dir
from .methods import METHODS, UnknownMethod, method_class
from .metrics import NEAR_OBSERVATIONS
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


def skipped_methods(methods: Sequence[str] | None, dataset: str | None = None) -> dict[str, str]:
    """Methods that cannot run with this version of the core (e.g. a mode the config does not
    have yet) or on this dataset, with the reason; they are left out of the run and named in
    results.md."""
    names = tuple(n for n in (methods or METHODS) if n in METHODS)  # unknown names: EvalError elsewhere
    return {n: why for n in dict.fromkeys(names) if (why := method_class(n).unavailable(dataset)) is not None}


def cache_dir(embedding_cache: str | Path | bool | None) -> str | None:
    """The embedding cache directory: True the default one, a path that one, False/None off."""
    if embedding_cache is None or embedding_cache is False:
        return None
    if embedding_cache is True:
        return str(default_cache_dir())
    return str(Path(embedding_cache).expanduser())


def evaluate(dataset: str, data: str | Path, budgets: Sequence[int] = (4000, 8000),
             methods: Sequence[str] | None = None, *, limit: int | None = None, workers: int = 1,
             progress: bool = False, dump_path: Path | None = None,
             config: dict[str, Any] | None = None,
             on_partial: Callable[[list[dict[str, Any]]], None] | None = None,
             threads: int | None = None, embedding_cache: str | Path | bool | None = True,
             stats: dict[str, Any] | None = None, near: int = NEAR_OBSERVATIONS) -> list[dict[str, Any]]:
    """Evaluate methods on a dataset file; returns rows ``{dataset, method, budget, metric, value, n}``.

    Trajectories also get the prompt-cache rows ``cached_prefix_share``, ``cost_per_call``
    (carrying its ``price_model``) and ``calls`` (see :mod:`flexamem_eval.report`).
    ``threads``: torch threads per process (default: the cores shared among the workers).
    ``embedding_cache``: True (default) keeps embeddings in ``~/.cache/flexamem/embeddings``,
    a path keeps them there, False embeds everything afresh. Methods the core cannot run yet
    (:func:`skipped_methods`) are left out. ``stats``, when given, is filled with the run's
    wall time, items, skipped methods and embedding counts (texts from the cache / computed)."""
    if threads is not None and threads < 1:
        raise EvalError(f"threads must be at least 1, got {threads}")
    budgets_t, names = _check(budgets, methods)
    skipped = skipped_methods(names, dataset)
    names = tuple(n for n in names if n not in skipped)
    if not names:
        raise EvalError("no method can run: " + "; ".join(f"{n}: {why}" for n, why in skipped.items()))
    items = load(dataset, data, limit)
    if not items:
        raise EvalError(f"{data}: no items to evaluate")
    if near < 0:
        raise EvalError(f"near must be at least 0, got {near}")
    spec = Spec(dataset=dataset, budgets=budgets_t, methods=names, dump=dump_path is not None,
                config=dict(config or {}), embedding_cache=cache_dir(embedding_cache), near=near)
    t0 = time.perf_counter()

    done: list[ItemResult] = []

    def flush(res: ItemResult) -> None:
        if dump_path is not None:
            write_dumps(dump_path, [res])
            res.dumps.clear()
        done.append(res)
        if on_partial is not None:
            on_partial(aggregate(dataset, done))

    results = run(items, spec, workers=workers, progress=progress, on_result=flush, threads=threads)
    if stats is not None:
        stats.update(dataset=dataset, items=len(items), workers=workers, skipped=skipped,
                     seconds=round(time.perf_counter() - t0, 1), embedding_cache=spec.embedding_cache,
                     embeddings_cached=sum(r.embeddings_cached for r in results),
                     embeddings_computed=sum(r.embeddings_computed for r in results),
                     item_seconds=round(sum(r.seconds for r in results), 1),
                     method_seconds={m: round(sum(r.method_seconds.get(m, 0.0) for r in results), 1)
                                     for m in names})
    return aggregate(dataset, results)


def evaluate_to_dir(dataset: str, data: str | Path, *, budgets: Sequence[int], methods: Sequence[str] | None,
                    out: str | Path, limit: int | None = None, workers: int = 1, dump: bool = False,
                    progress: bool = True, threads: int | None = None,
                    embedding_cache: str | Path | bool | None = True,
                    stats: dict[str, Any] | None = None, config: dict[str, Any] | None = None,
                    near: int = NEAR_OBSERVATIONS) -> list[Path]:
    """Run :func:`evaluate` and write results.json, results.md, plots (and renders.jsonl).

    results.md names the methods that were skipped (:func:`skipped_methods`) and why."""
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    dump_path = out_dir / "renders.jsonl" if dump else None
    if dump_path is not None and dump_path.exists():
        dump_path.unlink()
    order = list(methods or METHODS)
    notes = [f"`{n}` skipped: {why}" for n, why in skipped_methods(methods, dataset).items()]

    def partial(rows: list[dict[str, Any]]) -> None:  # tables of the items done so far
        write_outputs(out_dir, rows, order, plots=False, notes=notes)

    rows = evaluate(dataset, data, budgets, methods, limit=limit, workers=workers, progress=progress,
                    dump_path=dump_path, on_partial=partial, threads=threads,
                    embedding_cache=embedding_cache, stats=stats, config=config, near=near)
    paths = write_outputs(out_dir, rows, order, notes=notes)
    return [*paths, dump_path] if dump_path is not None else paths
