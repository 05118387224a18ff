"""`flexamem bench` runs end to end on a small store: every mode and setting is timed, no
render embeds more than its query, and a persistent store is reopened in this process and
in three new ones, whose fastest and slowest times are reported."""

from __future__ import annotations

import sqlite3

import pytest

from flexamem_core.index.embeddings import HashingEmbedder
from flexamem_tools.bench import measure

SETTINGS = {"auto/per-call", "auto/stable", "unit/per-call", "unit/stable", "piece/per-call", "piece/stable"}


def _by_metric(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r.get("mode", ""), r["metric"]): r for r in rows}


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_bench_times_every_setting_and_reopens(store, tmp_path):
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'bench.db'}"
    rows = measure(30, 8, 3000, HashingEmbedder(), url)
    got = _by_metric(rows)
    assert {r["mode"] for r in rows if "mode" in r} == SETTINGS
    for mode in SETTINGS:
        assert got[(mode, "render_ms_p95")]["value"] >= got[(mode, "render_ms_p50")]["value"] > 0
        # the process's own CPU time in the render, beside the wall time
        assert got[(mode, "render_cpu_ms_p95")]["value"] >= got[(mode, "render_cpu_ms_p50")]["value"] > 0
        # a render embeds its query (task and newest unit) and nothing else; a cache-stable
        # call that appends, or extends with no room for detail, embeds nothing
        assert got[(mode, "max_texts_embedded_per_render")]["value"] <= 2
        assert got[(mode, "max_texts_embedded_per_render")]["value"] > 0 or mode.endswith("/stable")
    assert got[("unit/stable", "appended_share")]["value"] > 0  # the cache-stable calls append
    assert got[("", "open_and_first_render_ms")]["value"] > 0
    assert all(r["store"] == store for r in rows)
    reopened = got.get(("", "open_and_first_render_new_process_ms"))
    if store == "memory":
        assert reopened is None  # an in-memory store does not outlive its process
        return
    assert 0 < reopened["value"] <= reopened["slowest_of_3_ms"]
    # what it wrote is in the file for another connection: the units it timed renders over,
    # and those the timed calls completed
    with sqlite3.connect(tmp_path / "bench.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM notes").fetchone()[0] > rows[0]["units"]


def test_bench_reads_the_scaling_from_one_run():
    """Each mode's render time at a size over its time at the next smaller size of the run."""
    from flexamem_tools.bench import scaling_rows

    rows = measure(12, 4, 3000, HashingEmbedder()) + measure(40, 4, 3000, HashingEmbedder())
    got = scaling_rows(rows)
    small, large = sorted({r["units"] for r in rows if r["metric"] == "render_ms_p50"})
    assert {r["mode"] for r in got} == SETTINGS
    assert {r["metric"] for r in got} == {"render_ms_p50_over_smaller", "render_ms_p95_over_smaller"}
    timed = _by_metric([r for r in rows if r["units"] == large])
    before = _by_metric([r for r in rows if r["units"] == small])
    for r in got:
        assert r["units"] == large and r["history_ratio"] == large / small and r["store"] == "memory"
        metric = r["metric"].removesuffix("_over_smaller")
        assert r["value"] == timed[(r["mode"], metric)]["value"] / before[(r["mode"], metric)]["value"]
    assert scaling_rows(measure(12, 4, 3000, HashingEmbedder())) == []  # one size: nothing to compare
