"""Aggregate render records into result rows, a readable Markdown report and plots.

A row is ``{dataset, method, budget, metric, value, n}``; ``n`` is what the value is a share
or statistic of (evidence turns, questions, reused strings, renders, units). Breakdowns by
question type or category are rows whose metric is ``<metric>[<group>]``.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from flexamem_core.cache.prefix import CACHED_PRICE, NEW_PRICE, call_cost

from .metrics import clustered_share_ci, percentile, share
from .plots import plot_metrics, plot_prompt_cache
from .runner import ItemResult, RenderRecord

CONVERSATION_METRICS = ("evidence_turns_full", "evidence_turns_part", "questions_all_evidence")
TRAJECTORY_METRICS = ("reused_detail_recall", "command_trace_recall", "task_kept")
#: ``reused_detail_recall`` split by distance (``flexamem eval --near``), tables only.
DISTANCE_METRICS = ("reused_detail_recall_near", "reused_detail_recall_far")
#: The spread of ``reused_detail_recall`` (tables only, not plotted).
SPREAD_METRICS = ("reused_detail_recall_per_step", "reused_detail_recall_ci_low", "reused_detail_recall_ci_high")
#: The spread of ``evidence_turns_full`` (tables only).
EVIDENCE_SPREAD_METRICS = ("evidence_turns_full_ci_low", "evidence_turns_full_ci_high")
#: Prompt caching over the model calls whose history exceeds B_bar (trajectories).
CACHE_METRICS = ("cached_prefix_share", "cost_per_call", "cost_per_call_marked", "calls")
COMMON_METRICS = ("context_tokens_mean", "context_tokens_max", "render_ms_p50", "render_ms_p95",
                  "write_ms_per_unit", "llm_calls_per_unit")

#: The price model of ``cost_per_call``, carried by its rows in results.json.
PRICE_MODEL = {
    "unit": "price of one plain (uncached) input token",
    "cached_token": CACHED_PRICE,
    "new_token": NEW_PRICE,
    "cached": "longest common token prefix with the previous call of the same method and budget",
}
PRICE_NOTE = (
    f"Prompt caching (trajectories): `cached_prefix_share` is cached / prompt tokens summed over the model "
    f"calls whose history exceeds B_bar = 0.95 x budget, a call's cached tokens being its longest common "
    f"token prefix with the previous call of the same method and budget (the previous call may be a "
    f"passthrough below B_bar; the first call of a run has none). `cost_per_call` is the mean over those "
    f"calls of {CACHED_PRICE} x cached + {NEW_PRICE} x new input tokens, in units of one plain input token "
    f"(cache reads at {CACHED_PRICE}, cache writes at {NEW_PRICE}, as Anthropic bills them; output tokens "
    f"not counted). `cost_per_call_marked` prices the same calls as a provider that caches only at marked "
    f"places (Anthropic's `cache_control`): every request marked at its end, as mini-swe-agent and LangChain's "
    f"Anthropic middleware mark it, and a FlexA-Mem request also after its fixed prompt and after its memory "
    f"(`Rendered.cache_breakpoints()`); a call reads the longest prefix an earlier call marked, within 20 "
    f"messages before one of its marks. `calls` is the number of those calls.")

#: How a method is named in tables and plots when its name alone would mislead.
LABELS = {
    "amem": "amem (rule records, no LLM)",
    "amem-fit-or-degrade": "amem-fit-or-degrade (rule records)",
    "pamer": "pamer (token trigger, rule summaries)",
    "pamer-plus": "pamer-plus (token trigger, rule summaries)",
    "full": "full (no budget)",
}


def _row(dataset: str, method: str, budget: int, metric: str, value: float | None, n: int) -> dict[str, Any]:
    return {"dataset": dataset, "method": method, "budget": budget, "metric": metric,
            "value": None if value is None else round(float(value), 6), "n": int(n)}


def _evidence_rows(dataset: str, method: str, budget: int, recs: Sequence[RenderRecord],
                   suffix: str = "") -> list[dict[str, Any]]:
    with_ev = [r for r in recs if r.evidence_turns]
    turns = sum(r.evidence_turns for r in with_ev)
    return [
        _row(dataset, method, budget, f"evidence_turns_full{suffix}",
             share(sum(r.evidence_full for r in with_ev), turns), turns),
        _row(dataset, method, budget, f"evidence_turns_part{suffix}",
             share(sum(r.evidence_part for r in with_ev), turns), turns),
        _row(dataset, method, budget, f"questions_all_evidence{suffix}",
             share(sum(bool(r.all_evidence) for r in with_ev), len(with_ev)), len(with_ev)),
    ]


def _evidence_spread_rows(dataset: str, method: str, budget: int, recs: Sequence[RenderRecord]
                          ) -> list[dict[str, Any]]:
    """A 95% bootstrap interval of ``evidence_turns_full`` with whole questions resampled
    (:func:`~flexamem_eval.metrics.clustered_share_ci`); n: the questions with evidence."""
    with_ev = [r for r in recs if r.evidence_turns]
    ci = clustered_share_ci([r.evidence_full for r in with_ev], [r.evidence_turns for r in with_ev])
    return [_row(dataset, method, budget, "evidence_turns_full_ci_low", ci[0] if ci else None, len(with_ev)),
            _row(dataset, method, budget, "evidence_turns_full_ci_high", ci[1] if ci else None, len(with_ev))]


def aggregate(dataset: str, results: Sequence[ItemResult]) -> list[dict[str, Any]]:
    """Result rows for every method and budget found in the results."""
    renders: dict[tuple[str, int], list[RenderRecord]] = defaultdict(list)
    for res in results:
        for r in res.renders:
            renders[(r.method, r.budget)].append(r)
    writes: dict[str, list] = defaultdict(list)
    for res in results:
        for w in res.writes:
            writes[w.method].append(w)
    conversation = any(r.step is None for recs in renders.values() for r in recs)
    rows: list[dict[str, Any]] = []
    for (method, budget), recs in sorted(renders.items()):
        if conversation:
            rows += _evidence_rows(dataset, method, budget, recs)
            rows += _evidence_spread_rows(dataset, method, budget, recs)
            rows.append(_row(dataset, method, budget, "questions", len(recs), len(recs)))
            rows.append(_row(dataset, method, budget, "abstention_questions",
                             sum(res.abstentions for res in results), len(recs)))
            groups = sorted({r.group for r in recs})
            for g in groups:
                rows += _evidence_rows(dataset, method, budget, [r for r in recs if r.group == g], f"[{g}]")
        else:
            reused = sum(r.reused_total for r in recs)
            trace = sum(r.trace_total for r in recs)
            rows.append(_row(dataset, method, budget, "reused_detail_recall",
                             share(sum(r.reused_hits for r in recs), reused), reused))
            far = sum(r.far_total for r in recs)
            far_hits = sum(r.far_hits for r in recs)
            rows.append(_row(dataset, method, budget, "reused_detail_recall_near",
                             share(sum(r.reused_hits for r in recs) - far_hits, reused - far), reused - far))
            rows.append(_row(dataset, method, budget, "reused_detail_recall_far", share(far_hits, far), far))
            rows.append(_row(dataset, method, budget, "command_trace_recall",
                             share(sum(r.trace_hits for r in recs), trace), trace))
            known = [r.task_kept for r in recs if r.task_kept is not None]
            rows.append(_row(dataset, method, budget, "task_kept", share(sum(known), len(known)), len(known)))
            rows += _spread_rows(dataset, method, budget, recs)
            rows.append(_row(dataset, method, budget, "steps", len(recs), len(recs)))
            rows += _cache_rows(dataset, method, budget, recs)
        tokens = [r.tokens for r in recs]
        ms = [r.ms for r in recs]
        rows.append(_row(dataset, method, budget, "context_tokens_mean", sum(tokens) / len(tokens), len(recs)))
        rows.append(_row(dataset, method, budget, "context_tokens_max", max(tokens), len(recs)))
        rows.append(_row(dataset, method, budget, "render_ms_p50", percentile(ms, 50), len(recs)))
        rows.append(_row(dataset, method, budget, "render_ms_p95", percentile(ms, 95), len(recs)))
        units = sum(w.units for w in writes[method])
        rows.append(_row(dataset, method, budget, "write_ms_per_unit",
                         share(sum(w.ms for w in writes[method]), units), units))
        rows.append(_row(dataset, method, budget, "llm_calls_per_unit",
                         share(sum(w.llm_calls for w in writes[method]), units), units))
    return rows


def _spread_rows(dataset: str, method: str, budget: int, recs: Sequence[RenderRecord]) -> list[dict[str, Any]]:
    """How far ``reused_detail_recall`` can be trusted: the mean over steps of each step's
    share (every step counts once, however many strings it reuses) and a 95% bootstrap
    interval over trajectories (:func:`~flexamem_eval.metrics.clustered_share_ci`)."""
    steps = [r for r in recs if r.reused_total]
    by_item: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in steps:
        by_item[r.item_id][0] += r.reused_hits
        by_item[r.item_id][1] += r.reused_total
    per_step = share(sum(r.reused_hits / r.reused_total for r in steps), len(steps))
    ci = clustered_share_ci([h for h, _ in by_item.values()], [t for _, t in by_item.values()])
    return [_row(dataset, method, budget, "reused_detail_recall_per_step", per_step, len(steps)),
            _row(dataset, method, budget, "reused_detail_recall_ci_low", ci[0] if ci else None, len(by_item)),
            _row(dataset, method, budget, "reused_detail_recall_ci_high", ci[1] if ci else None, len(by_item))]


def _cache_rows(dataset: str, method: str, budget: int, recs: Sequence[RenderRecord]) -> list[dict[str, Any]]:
    """``cached_prefix_share`` (n: prompt tokens), ``cost_per_call`` (n: calls) and ``calls``."""
    calls = [r for r in recs if r.cached is not None]
    tokens = sum(r.tokens for r in calls)
    cost = share(sum(call_cost(r.tokens, r.cached or 0) for r in calls), len(calls))
    return [
        _row(dataset, method, budget, "cached_prefix_share", share(sum(r.cached or 0 for r in calls), tokens),
             tokens),
        {**_row(dataset, method, budget, "cost_per_call", cost, len(calls)), "price_model": PRICE_MODEL},
        _row(dataset, method, budget, "cost_per_call_marked",
             share(sum(call_cost(r.tokens, r.cached_marked or 0) for r in calls), len(calls)), len(calls)),
        _row(dataset, method, budget, "calls", len(calls), len(calls)),
    ]


# ------------------------------------------------------------------------------ Markdown

def _fmt(metric: str, value: float | None) -> str:
    if value is None:
        return "–"
    if metric.startswith(("evidence", "questions_all", "reused", "command", "cached_prefix", "task_kept")):
        return f"{100 * value:.1f}"
    if metric.startswith(("context_tokens", "questions", "steps", "abstention", "calls", "cost_per_call")):
        return f"{value:,.0f}"
    return f"{value:.2f}"


def _table(header: Sequence[str], body: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return lines


def markdown(rows: Sequence[dict[str, Any]], methods_order: Sequence[str] | None = None,
             notes: Sequence[str] = ()) -> str:
    """Tables a person can read: per dataset and budget, one row per method; ``notes`` (e.g.
    methods skipped and why) are listed under the introduction."""
    out: list[str] = ["# FlexA-Mem evaluation (no LLM)", "",
                      "Shares in %, tokens counted with the shared o200k counter, latencies in ms. "
                      "`amem` uses rule records (no LLM); `pamer` replaces the learned hidden-state "
                      "trigger with the 1,024-token threshold and writes rule summaries.", ""]
    if notes:
        out += [*(f"- {n}" for n in notes), ""]
    index = {(r["dataset"], r["method"], r["budget"], r["metric"]): r for r in rows}
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        drows = [r for r in rows if r["dataset"] == dataset]
        methods = list(dict.fromkeys([m for m in (methods_order or []) if any(r["method"] == m for r in drows)]
                                     + [r["method"] for r in drows]))
        budgets = sorted({r["budget"] for r in drows})
        conversation = any(r["metric"] == "evidence_turns_full" for r in drows)
        cache = () if conversation or not any(r["metric"] == "cost_per_call" for r in drows) else CACHE_METRICS
        main = (CONVERSATION_METRICS + EVIDENCE_SPREAD_METRICS if conversation else
                TRAJECTORY_METRICS + DISTANCE_METRICS + SPREAD_METRICS) + cache + COMMON_METRICS
        if cache:
            out += [PRICE_NOTE, ""]
        for budget in budgets:
            n_line = ""
            first = index.get((dataset, methods[0], budget, main[0]))
            if first:
                n_line = f" (n = {first['n']:,} for {main[0]})"
            out += [f"## {dataset}, budget {budget:,}{n_line}", ""]
            body = []
            for m in methods:
                body.append([LABELS.get(m, m)] + [_fmt(k, (index.get((dataset, m, budget, k)) or {}).get("value"))
                                                  for k in main])
            out += [*_table(["method", *main], body), ""]
        groups = sorted({r["metric"].split("[", 1)[1][:-1] for r in drows if "[" in r["metric"]})
        if groups:
            for metric in CONVERSATION_METRICS[:1] + CONVERSATION_METRICS[2:]:
                for budget in budgets:
                    out += [f"### {dataset}, {metric} by {'question type' if dataset == 'longmemeval' else 'category'}"
                            f", budget {budget:,}", ""]
                    ns = {g: (index.get((dataset, methods[0], budget, f"{metric}[{g}]")) or {}).get("n", 0)
                          for g in groups}
                    body = [[LABELS.get(m, m)] + [_fmt(metric, (index.get((dataset, m, budget, f"{metric}[{g}]"))
                                                                or {}).get("value")) for g in groups]
                            for m in methods]
                    out += [*_table(["method", *(f"{g} (n={ns[g]})" for g in groups)], body), ""]
    return "\n".join(out)


def write_outputs(out_dir: Path, rows: Sequence[dict[str, Any]], methods_order: Sequence[str] = (),
                  plots: bool = True, notes: Sequence[str] = ()) -> list[Path]:
    """``results.json``, ``results.md``, one PNG per metric and one of the prompt-cache
    measures (trajectories); returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(list(rows), indent=1), encoding="utf-8")
    md_path = out_dir / "results.md"
    md_path.write_text(markdown(rows, methods_order, notes), encoding="utf-8")
    if not plots:
        return [json_path, md_path]
    lines = plot_metrics(out_dir, rows, CONVERSATION_METRICS + TRAJECTORY_METRICS + COMMON_METRICS,
                         methods_order, LABELS)
    return [json_path, md_path, *lines, *plot_prompt_cache(out_dir, rows, methods_order, LABELS)]
