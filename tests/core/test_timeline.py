"""The timeline: aligned 4-ary merges, memoised and reused, append-only across calls."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import FlexAMem, FlexAMemConfig, LLMRecordWriter, RuleRecordWriter, Tuning
from flexamem_core.index.namespace import NamespaceIndex
from flexamem_core.recall.report import all_unit_rows
from flexamem_core.recall.timeline import Timeline


def history(n_steps: int) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a coding agent.", "id": "sys"},
            {"role": "user", "content": "TASK: make the date parser accept ISO weeks", "id": "task"}]
    for i in range(n_steps):
        msgs += [
            {"role": "assistant", "content": f"THOUGHT: look at part {i}\n```bash\nsed -n {i},+40p src/mod_{i}.py\n```",
             "id": f"a{i}"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\n"
                                        + "\n".join(f"{i}:{k} def helper_{i}_{k}(x): return x + {k}"
                                                    for k in range(25)) + "\n</output>", "id": f"o{i}"},
        ]
    return msgs


class CountingChat:
    """A user's chat function: JSON records, short merged records; counts merge calls."""

    def __init__(self) -> None:
        self.merges = 0
        self.records = 0

    def __call__(self, messages: list[dict]) -> str:
        prompt = messages[-1]["content"]
        if prompt.startswith("Merge these"):
            self.merges += 1
            return f"merged summary number {self.merges}"
        self.records += 1
        return json.dumps({"record": f"record {self.records}: read a module", "keywords": ["module"]})


@pytest.fixture(scope="module")
def written(tokenizer, hashing_embedder):
    """A store with 32 written units (one step each) and its namespace index."""
    mem = FlexAMem(FlexAMemConfig(tuning=Tuning(agent_unit_tokens=50)), tokenizer=tokenizer, embedder=hashing_embedder)
    mem.ingest(history(33))
    index = NamespaceIndex(mem.store, "default")
    assert len(index.notes) == 32
    return mem, index


def check_shape(items, n_notes: int, fanin: int = 4) -> None:
    assert items[0].start == 0 and items[-1].end == n_notes
    assert all(a.end == b.start for a, b in zip(items, items[1:])), "items cover the units in order"
    for it in items:
        span = fanin ** it.level
        assert it.end - it.start == span and it.start % span == 0, "merges are aligned 4-ary groups"
    levels = [it.level for it in items]
    assert levels == sorted(levels, reverse=True), "older items are merged at least as far as newer ones"


@settings(deadline=None, max_examples=40, suppress_health_check=list(HealthCheck))
@given(fraction=st.floats(0.4, 1.0))
def test_merges_are_aligned_lowest_level_first_and_oldest_first(fraction, written, tokenizer):
    # Down to 40% of 32 records, aligned merges suffice (two level-2 records are ~35%).
    _, index = written
    notes = index.notes
    timeline = Timeline(notes, index, RuleRecordWriter(), tokenizer)
    full = timeline.total
    timeline.merge_down_to(full * fraction)
    items = timeline.items
    assert timeline.total == sum(it.tokens for it in items) <= full * fraction
    check_shape(items, len(notes))
    if any(it.level >= 2 for it in items):
        # a level-2 merge happens only once no aligned group of 4 records is left
        assert sum(1 for it in items if it.level == 0) < 4


def test_past_the_aligned_floor_the_oldest_items_merge_anyway(written, tokenizer):
    _, index = written
    timeline = Timeline(index.notes, index, RuleRecordWriter(), tokenizer)
    timeline.merge_down_to(1)
    assert timeline.items[0].start == 0 and timeline.items[-1].end == 32
    assert len(timeline.items) == 1 and timeline.hidden_until == 0  # merged, nothing hidden


def test_no_merge_when_the_timeline_fits(written, tokenizer):
    _, index = written
    timeline = Timeline(index.notes, index, RuleRecordWriter(), tokenizer)
    timeline.merge_down_to(timeline.total)
    assert all(it.level == 0 for it in timeline.items)


def test_first_merges_take_the_oldest_group(written, tokenizer):
    _, index = written
    timeline = Timeline(index.notes, index, RuleRecordWriter(), tokenizer)
    timeline.merge_down_to(timeline.total - 1)
    assert [(it.start, it.end, it.level) for it in timeline.items[:2]] == [(0, 4, 1), (4, 5, 0)]
    assert all(it.level == 0 for it in timeline.items[1:])
    assert "(merged)" in timeline.items[0].line and timeline.items[0].line.startswith("- [steps 1-4]")


def test_hiding_removes_the_oldest_items_for_one_call(written, tokenizer):
    _, index = written
    timeline = Timeline(index.notes, index, RuleRecordWriter(), tokenizer)
    target = timeline.total // 2
    timeline.hide_down_to(target)
    assert timeline.total <= target and timeline.hidden_until == timeline.items[0].start > 0
    assert timeline.items[-1].end == len(index.notes)
    assert len(index.notes) == 32  # nothing left the store


def test_merged_records_are_memoised_and_reused(tokenizer, hashing_embedder):
    chat = CountingChat()
    mem = FlexAMem(FlexAMemConfig(budget=2500, mode="unit", tuning=Tuning(agent_unit_tokens=50)), tokenizer=tokenizer,
                   embedder=hashing_embedder, writer=LLMRecordWriter(chat))
    hist = history(40)
    first = mem.render(hist)
    assert chat.merges > 0, "this budget needs merged records"
    assert first.report["llm_calls"] == chat.merges
    merges = chat.merges
    second = mem.render(hist)
    assert chat.merges == merges, "the second render makes no new merge"
    assert second.report["llm_calls"] == 0
    assert second.memory_text == first.memory_text
    # A fresh process over the same store reuses the stored merged records too.
    again = FlexAMem(mem.config, store=mem.store, tokenizer=tokenizer, embedder=hashing_embedder,
                     writer=LLMRecordWriter(chat))
    assert again.render(hist).memory_text == first.memory_text
    assert chat.merges == merges


def merged_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "(merged)" in ln]


@pytest.mark.parametrize("mode", ["timeline-only", "unit"])
def test_timeline_is_append_only_as_the_history_grows(mode, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=4000, mode=mode, tuning=Tuning(agent_unit_tokens=50)), tokenizer=tokenizer,
                   embedder=hashing_embedder)
    prev = None
    kept = 0
    for n in range(30, 80, 2):
        text = mem.render(history(n)).memory_text
        assert text is not None
        if prev is not None and merged_lines(prev):
            before, after = merged_lines(prev), merged_lines(text)
            if after[: len(before)] == before:  # no new merge of old items: only appended at the end
                kept += 1
                head, new = prev.splitlines(), text.splitlines()
                first = next(i for i, ln in enumerate(head) if "(merged)" in ln)
                last = max(i for i, ln in enumerate(head) if "(merged)" in ln)
                # Recovered detail may follow a merged record; the timeline itself is a prefix.
                upto = last if mode == "timeline-only" else first
                assert new[: upto + 1] == head[: upto + 1]
        prev = text
    assert kept >= 5, "most calls keep the timeline's prefix"


def test_report_rows_cost_what_the_call_did_and_are_fresh_in_every_report(tokenizer, hashing_embedder):
    """A per-call render reports rows only for the units it did something with, and the old
    units as runs of the timeline: the runs cover every old unit once, in order, and agree
    with the rows and the counts; a row changed by the caller does not show up in the next
    report."""
    from flexamem_tools.bench import synthetic_history

    mem = FlexAMem(FlexAMemConfig(budget=2500, cache_stable=False, tuning=Tuning(agent_unit_tokens=120)),
                   tokenizer=tokenizer, embedder=hashing_embedder)
    history = synthetic_history(150)
    first = mem.render(history[:900])
    index = mem.state("default").index
    rep = first.report
    old = rep["old_units"]
    assert old > 50
    runs = rep["unit_runs"]
    assert runs[0][0] == 0 and runs[-1][1] == old and all(a[1] == b[0] for a, b in zip(runs, runs[1:]))
    assert all(a[2] != b[2] for a, b in zip(runs, runs[1:])), "adjacent runs of one resolution are joined"
    assert len(runs) <= first.memory_text.count("\n"), "at most a run per line of the memory"
    rows = rep["units"]
    assert 0 < len(rows) < old / 4, "rows only for what the call did"
    assert all("why" in r or r["resolution"] in ("raw", "excerpt") or r.get("pieces") for r in rows)
    assert [(r["unit"], r["label"]) for r in rows] == [(index.notes[r["position"]].unit_key,
                                                        index.notes[r["position"]].label) for r in rows]
    assert sum(rep["resolutions"].values()) == old
    assert rep["resolutions"]["raw"] + rep["resolutions"]["excerpt"] == \
        sum(r["resolution"] in ("raw", "excerpt") for r in rows)
    expanded = all_unit_rows(rep)
    assert Counter(r["resolution"] for r in expanded) == Counter({k: n for k, n in rep["resolutions"].items() if n})
    for r in rows:
        r["resolution"] = "changed by the caller"
        r["extra"] = 1
    again = mem.render(history[:900])
    assert "changed by the caller" not in {r["resolution"] for r in again.report["units"]}
    assert all("extra" not in r for r in again.report["units"])
    later = mem.render(history)
    assert later.report["unit_runs"][-1][1] == later.report["old_units"] > old


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
def test_an_unaligned_merge_covers_its_items_not_the_units_under_them(url, tokenizer, hashing_embedder, tmp_path):
    # Past the aligned floor of a long history the oldest items merge regardless of alignment,
    # spanning most of the history. Such a record is keyed by and covers the few items it
    # merges, so what it costs to key, store and check does not grow with the history; a
    # fresh index over the store reuses it, and forgetting a unit deep under it drops it.
    from flexamem_core.stores.url import open_store

    store = open_store("memory://" if url == "memory://" else f"sqlite:///{tmp_path / 'm.db'}")
    mem = FlexAMem(FlexAMemConfig(tuning=Tuning(agent_unit_tokens=50)), store=store, tokenizer=tokenizer,
                   embedder=hashing_embedder)
    mem.ingest(history(301))
    chat = CountingChat()
    index = NamespaceIndex(store, "default")
    assert len(index.notes) == 300
    timeline = Timeline(index.notes, index, LLMRecordWriter(chat), tokenizer)
    timeline.merge_down_to(1)
    top = timeline.items[0]
    assert (top.start, top.end) == (0, 300) and top.level >= 5
    record = store.get_merged("default", top.merged_key)
    assert record is not None and 2 <= len(record.covers) <= 4, "it covers its items"
    assert all(store.has_unit("default", k) or store.get_merged("default", k) is not None for k in record.covers)
    assert any(store.get_merged("default", k) is not None for k in record.covers), "merged items among them"
    merges = chat.merges

    fresh = NamespaceIndex(store, "default")
    again = Timeline(fresh.notes, fresh, LLMRecordWriter(chat), tokenizer)
    again.merge_down_to(1)
    assert [it.line for it in again.items] == [it.line for it in timeline.items]
    assert chat.merges == merges, "a fresh index reads the stored merges back"

    assert mem.forget("default", index.notes[3].unit_key) == 1
    assert store.get_merged("default", top.merged_key) is None, "forgetting follows covers through merges"
