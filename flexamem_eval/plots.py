"""One PNG per metric: the metric against the budget, one line per method."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def plot_metrics(out_dir: Path, rows: Sequence[dict[str, Any]], methods_order: Sequence[str] = ()) -> list[Path]:
    """Plot every overall metric (no breakdown) of every dataset; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .report import LABELS

    written: list[Path] = []
    from .report import COMMON_METRICS, CONVERSATION_METRICS, TRAJECTORY_METRICS

    plotted = set(CONVERSATION_METRICS + TRAJECTORY_METRICS + COMMON_METRICS)
    keys = dict.fromkeys((r["dataset"], r["metric"]) for r in rows if r["metric"] in plotted)
    for dataset, metric in keys:
        sel = [r for r in rows if r["dataset"] == dataset and r["metric"] == metric and r["value"] is not None]
        if not sel:
            continue
        methods = list(dict.fromkeys([m for m in methods_order if any(r["method"] == m for r in sel)]
                                     + [r["method"] for r in sel]))
        fig, ax = plt.subplots(figsize=(10, 5))
        for i, m in enumerate(methods):
            pts = sorted((r["budget"], r["value"]) for r in sel if r["method"] == m)
            style = "-" if i < 10 else "--"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=LABELS.get(m, m))
        ax.set_xscale("log", base=2)
        budgets = sorted({r["budget"] for r in sel})
        ax.set_xticks(budgets, [f"{b // 1000}k" if b % 1000 == 0 else str(b) for b in budgets])
        ax.set_xlabel("budget (tokens)")
        ax.set_ylabel(metric)
        ax.set_title(f"{dataset}: {metric}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        path = out_dir / f"{dataset}_{metric}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
