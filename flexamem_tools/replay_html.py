"""A replay people can look at: one self-contained HTML page for a sequence of model calls.

Per call: a bar of the budget split (system prompt and task, memory, recent window,
unused) with the usable budget B̄ marked, the prefix a provider's prompt cache would
reuse, a strip of every old unit coloured by its resolution (raw, excerpt, record,
merged, hidden) followed by the window's units, and a click-through (``<details>``) to
exactly the messages sent. No script, no external file: it opens anywhere, offline.

    from flexamem_tools.replay_html import write_html
    write_html([mem.render(h) for h in calls], "replay.html")
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from flexamem_core.recall.report import RESOLUTIONS
from flexamem_core.request.rendered import Rendered

from .replay_view import StepView, as_views

PARTS = {"system + task": "#6c757d", "memory": "#7b61ff", "window": "#2a9d8f", "history": "#2a9d8f",
         "unused": "#e9ecef"}
COLOURS = {"raw": "#2a9d8f", "excerpt": "#e9c46a", "record": "#f4a261", "merged": "#e76f51",
           "hidden": "#ced4da", "window": "#264653"}

B_BAR = "B\u0304"  # B with a macron: the usable budget, 0.95 B

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#212529;padding:0 12px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:0 0 8px}
.sub{color:#6c757d;margin-bottom:16px}
table{border-collapse:collapse;width:100%;margin:12px 0 24px}td,th{padding:3px 8px;border-bottom:1px solid #dee2e6;
text-align:right}th:first-child,td:first-child,td.l,th.l{text-align:left}
.step{border:1px solid #dee2e6;border-radius:6px;padding:12px 14px;margin:14px 0}
.bar{position:relative;display:flex;height:26px;border-radius:4px;overflow:hidden;background:#e9ecef}
.seg{height:100%}.bbar{position:absolute;top:0;bottom:0;width:2px;background:#dc3545}
.cache{height:6px;background:#0d6efd;border-radius:3px;margin:3px 0 0}
.legend{margin:6px 0;color:#495057}.key{display:inline-block;width:11px;height:11px;border-radius:2px;
margin:0 4px 0 10px;vertical-align:-1px}
.strip{display:flex;gap:1px;height:18px;margin:6px 0}.unit{flex:1 1 0;min-width:3px;border-radius:2px}
details{margin-top:8px}summary{cursor:pointer;color:#0d6efd}
.msg{border-left:4px solid #adb5bd;margin:8px 0;padding:2px 10px;background:#f8f9fa}
.msg.memory{border-color:#7b61ff;background:#f3f0ff}.mh{font-weight:600;color:#495057}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font:12px/1.4 ui-monospace,monospace}
"""


def _key(colour: str, label: str) -> str:
    return f'<span class="key" style="background:{colour}"></span>{escape(label)}'


def _bar(view: StepView) -> str:
    scale = max(view.budget, view.tokens, 1)
    segs = "".join(
        f'<span class="seg" style="width:{100 * n / scale:.3f}%;background:{PARTS[name]}" '
        f'title="{escape(name)}: {n:,} tokens"></span>' for name, n in view.split.items() if n > 0)
    marker = f'<span class="bbar" style="left:{100 * view.effective_budget / scale:.3f}%" ' \
             f'title="usable budget {B_BAR} = {view.effective_budget:,} tokens"></span>'
    cache = f'<div class="cache" style="width:{100 * min(view.reused_prefix, scale) / scale:.3f}%" ' \
            f'title="prompt-cache reused prefix: {view.reused_prefix:,} tokens"></div>'
    legend = "".join(_key(PARTS[name], f"{name} {n:,}") for name, n in view.split.items())
    return (f'<div class="bar" role="img" aria-label="budget split">{segs}{marker}</div>{cache}'
            f'<div class="legend">{legend}{_key("#0d6efd", f"cache-reused prefix {view.reused_prefix:,}")}'
            f'{_key("#dc3545", f"{B_BAR} {view.effective_budget:,}")}</div>')


def _strip(view: StepView) -> str:
    if not view.units and not view.window_units:
        return ""
    cells = []
    for u in view.units:
        res = str(u.get("resolution"))
        tip = f"{u.get('label', '')}: {res}" + (f" ({u['why']})" if u.get("why") else "") + \
            (f", score {u['score']}" if u.get("score") is not None else "")
        cells.append(f'<span class="unit" style="background:{COLOURS.get(res, "#000")}" title="{escape(tip)}"></span>')
    cells += [f'<span class="unit" style="background:{COLOURS["window"]}" title="recent window: sent verbatim">'
              "</span>"] * view.window_units
    counts = Counter(str(u.get("resolution")) for u in view.units)
    legend = "".join(_key(COLOURS[r], f"{r} {counts.get(r, 0)}") for r in RESOLUTIONS) + \
        _key(COLOURS["window"], f"window {view.window_units}")
    return f'<div class="strip" role="img" aria-label="units by resolution">{"".join(cells)}</div>' \
           f'<div class="legend">{legend}</div>'


def _messages(view: StepView) -> str:
    items = []
    for i, m in enumerate(view.messages):
        tags = " · ".join(t for t in ("memory" if m.memory else "", "cut to fit" if m.cut else "", m.note) if t)
        items.append(f'<div class="msg{" memory" if m.memory else ""}"><div class="mh">#{i} {escape(m.role)}'
                     f'{" · " + escape(tags) if tags else ""}</div><pre>{escape(m.text)}</pre></div>')
    return f"<details><summary>the {len(view.messages)} messages sent ({view.tokens:,} tokens)</summary>" \
           f"{''.join(items)}</details>"


def _title(view: StepView) -> str:
    facts = view.facts
    parts = [f"Step {view.number}", view.cache_step, f"{view.tokens:,} of {view.budget:,} tokens"]
    if "history_tokens" in facts:
        parts.append(f"history {facts['history_tokens']:,}")
    if "cached_tokens" in facts:
        parts.append(f"cached {facts['cached_tokens']:,}")
    return " · ".join(parts)


def step_html(view: StepView) -> str:
    """The section of one call."""
    return f'<section class="step" id="step-{view.number}"><h2>{escape(_title(view))}</h2>' \
           f"{_bar(view)}{_strip(view)}{_messages(view)}</section>"


def _overview(views: Sequence[StepView]) -> str:
    rows = []
    for v in views:
        counts = Counter(str(u.get("resolution")) for u in v.units)
        units = ", ".join(f"{counts[r]} {r}" for r in RESOLUTIONS if counts.get(r))
        rows.append(f'<tr><td><a href="#step-{v.number}">{v.number}</a></td><td class="l">{v.cache_step}</td>'
                    f"<td>{v.tokens:,}</td><td>{v.split.get('memory', 0):,}</td><td>{v.reused_prefix:,}</td>"
                    f'<td class="l">{escape(units)}</td></tr>')
    return ('<table><tr><th>step</th><th class="l">request</th><th>tokens</th><th>memory</th>'
            f'<th>cache-reused</th><th class="l">old units</th></tr>{"".join(rows)}</table>')


def html_page(steps: Sequence[Rendered | Mapping[str, Any]], *, title: str = "FlexA-Mem replay",
              subtitle: str = "") -> str:
    """The whole page for ``Rendered`` results or ``flexamem replay`` step dicts."""
    views = as_views(steps)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="icon" href="data:,">'
            f"<style>{CSS}</style></head><body><h1>{escape(title)}</h1>"
            f'<div class="sub">{escape(subtitle)}{" · " if subtitle else ""}{len(views)} model calls</div>'
            f"{_overview(views)}{''.join(step_html(v) for v in views)}</body></html>\n")


def write_html(steps: Sequence[Rendered | Mapping[str, Any]], path: str | Path, *,
               title: str = "FlexA-Mem replay", subtitle: str = "") -> Path:
    """Write :func:`html_page` to ``path`` (UTF-8); returns the path."""
    out = Path(path)
    out.write_text(html_page(steps, title=title, subtitle=subtitle), encoding="utf-8")
    return out
