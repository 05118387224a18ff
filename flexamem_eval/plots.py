"""PNG plots of result rows: one per metric against the budget, and one of the prompt-cache measures.

This module knows nothing of the report: the caller passes which metrics to plot and how
methods are labelled, so ``report`` imports ``plots`` and not the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from flexamem_core.cache.prefix import CACHED_PRICE, NEW_PRICE


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _methods(sel: Sequence[dict[str, Any]], methods_order: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([m for m in methods_order if any(r["method"] == m for r in sel)]
                              + [r["method"] for r in sel]))


def _budget_label(b: int) -> str:
    return f"{b // 1000}k" if b % 1000 == 0 else str(b)


def plot_metrics(out_dir: Path, rows: Sequence[dict[str, Any]], metrics: Iterable[str],
                 methods_order: Sequence[str] = (), labels: Mapping[str, str] | None = None) -> list[Path]:
    """One PNG per dataset and metric in ``metrics``: the metric against the budget, one line
    per method; returns the files written."""
    plt = _pyplot()
    labels = labels or {}
    plotted = set(metrics)
    written: list[Path] = []
    keys = dict.fromkeys((r["dataset"], r["metric"]) for r in rows if r["metric"] in plotted)
    for dataset, metric in keys:
        sel = [r for r in rows if r["dataset"] == dataset and r["metric"] == metric and r["value"] is not None]
        if not sel:
            continue
        fig, ax = plt.subplots(figsize=(10, 5))
        for i, m in enumerate(_methods(sel, methods_order)):
            pts = sorted((r["budget"], r["value"]) for r in sel if r["method"] == m)
            style = "-" if i < 10 else "--"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=labels.get(m, m))
        ax.set_xscale("log", base=2)
        budgets = sorted({r["budget"] for r in sel})
        ax.set_xticks(budgets, [_budget_label(b) for b in budgets])
        ax.set_xlabel("budget (tokens)")
        ax.set_ylabel(metric)
        ax.set_title(f"{dataset}: {metric}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        written.append(_save(plt, fig, out_dir / f"{dataset}_{metric}.png"))
    return written


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """Lay out, write and close one figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_prompt_cache(out_dir: Path, rows: Sequence[dict[str, Any]], methods_order: Sequence[str] = (),
                      labels: Mapping[str, str] | None = None) -> list[Path]:
    """Per dataset with ``cost_per_call`` rows, ``<dataset>_prompt_cache.png``: cost per call
    (left) and cached prefix share (right), one bar per method and budget."""
    plt = _pyplot()
    labels = labels or {}
    written: list[Path] = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows if r["metric"] == "cost_per_call"):
        value = {(r["method"], r["budget"], r["metric"]): r["value"] for r in rows
                 if r["dataset"] == dataset and r["metric"] in ("cost_per_call", "cached_prefix_share")}
        sel = [r for r in rows if r["dataset"] == dataset and r["metric"] == "cost_per_call"
               and r["value"] is not None]
        if not sel:
            continue
        methods = _methods(sel, methods_order)
        budgets = sorted({r["budget"] for r in sel})
        height = 0.8 / len(budgets)
        fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(methods) * max(1, len(budgets) / 2) + 1.6),
                                 sharey=True)
        panels = (("cost_per_call", "cost per call (plain input tokens)", 1.0),
                  ("cached_prefix_share", "cached prefix share (%)", 100.0))
        for ax, (metric, title, scale) in zip(axes, panels, strict=True):
            for j, b in enumerate(budgets):
                ys = [i + (j - (len(budgets) - 1) / 2) * height for i in range(len(methods))]
                xs = [scale * (value.get((m, b, metric)) or 0.0) for m in methods]
                ax.barh(ys, xs, height=height, label=f"budget {_budget_label(b)}")
            ax.set_title(title)
            ax.grid(alpha=0.3, axis="x")
        axes[0].set_yticks(range(len(methods)), [labels.get(m, m) for m in methods], fontsize=8)
        axes[0].invert_yaxis()
        axes[1].set_xlim(0, 100)
        axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.suptitle(f"{dataset}: prompt caching (cached token {CACHED_PRICE}, new token {NEW_PRICE} x input price)")
        written.append(_save(plt, fig, out_dir / f"{dataset}_prompt_cache.png"))
    return written
