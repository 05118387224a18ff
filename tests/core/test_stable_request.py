"""The prompt-cache-stable request: append, extend, render; and the per-thread state.

Every test renders a growing history call by call, as an agent loop does, and checks the
invariants on every call plus what the cache sees: an appended call starts with exactly
the previous request, an extended one keeps the previous memory text as a prefix.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import BudgetError, FlexAMem, FlexAMemConfig, InMemoryStore, Message, Tuning
from flexamem_core.cache.prefix import common_prefix_tokens
from flexamem_core.recall.assembly import MEMORY_CLOSE
from flexamem_core.request.counting import count_messages
from flexamem_core.request.properties import Context, problems
from tests.agent_runs import model_calls, text_action_run

from .checks import CountingEmbedder, independent_tokens, structure_problem
from .strategies import agent_history

# Each example renders every prefix of its history, so fewer examples than the one-call properties.
CALLS = settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=40)


def run(mem: FlexAMem, history: list[dict], budget: int | None = None) -> list:
    return [mem.render(h, budget=budget) for h in model_calls(history)]


@CALLS
@given(history=agent_history(min_steps=4, max_steps=30), budget=st.integers(600, 6000))
def test_every_call_of_a_growing_history_keeps_the_invariants(history, budget, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=budget), tokenizer=tokenizer, embedder=hashing_embedder)
    before = copy.deepcopy(history)
    previous = None
    for h in model_calls(history):
        try:
            r = mem.render(h)
        except BudgetError:
            previous = None  # documented: the fixed prompt or the newest step cannot fit at all
            continue
        assert r.tokens == count_messages(r.messages, tokenizer) == independent_tokens(r.messages)
        assert r.tokens <= int(budget * 0.95)
        assert problems(r.messages, Context([Message.from_dict(m) for m in h], r.report)) == {}
        assert structure_problem(r.messages) is None, structure_problem(r.messages)
        assert sum(1 for m in r.messages if m.metadata.get("flexamem") == "memory") <= 1
        newest = r.messages[-1]
        assert newest.metadata.get("flexamem_truncated") or newest.content == Message.from_dict(h[-1]).content, \
            "the newest message is always sent (cut with a mark only when it alone is over the budget)"
        step = r.report["cache"]["step"]
        if step == "append":
            assert previous is not None and r.messages[:len(previous.messages)] == previous.messages
            assert r.report["cache"]["reused_prefix_tokens"] == previous.tokens
        if step == "extend":
            head = previous.memory_text[: -len(MEMORY_CLOSE)]
            assert r.memory_text.startswith(head), "an extended memory keeps the previous one as a prefix"
        if step == "compact":
            kept = r.report["cache"]["kept_memory_chars"]
            head = previous.memory_text[:kept]
            assert 0 < kept < len(previous.memory_text) - len(MEMORY_CLOSE) and head.endswith("\n")
            assert r.memory_text.startswith(head), "a compacted memory keeps the previous one's leading records"
            assert all(line.startswith("- [") and "(raw)" not in line and "(excerpt)" not in line
                       for line in head.splitlines()[2:]), "what it keeps are record lines"
        assert r.report["cache"]["reused_prefix_tokens"] == (
            common_prefix_tokens(previous.messages, r.messages, tokenizer) if previous else 0)
        previous = r
    assert history == before, "the caller's messages were mutated"


@CALLS
@given(history=agent_history(min_steps=4, max_steps=25), budget=st.integers(800, 5000))
def test_the_same_calls_give_the_same_requests(history, budget, tokenizer, hashing_embedder):
    cfg = FlexAMemConfig(budget=budget)
    try:
        a = run(FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder), history)
        b = run(FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder), history)
    except BudgetError:
        return
    assert [r.messages for r in a] == [r.messages for r in b]
    assert [r.report for r in a] == [r.report for r in b]


@CALLS
@given(history=agent_history(min_steps=4, max_steps=25), budget=st.integers(800, 5000),
       mode=st.sampled_from(["unit", "piece"]))
def test_a_state_rebuilt_from_the_store_renders_byte_identically(history, budget, mode, tokenizer,
                                                                hashing_embedder):
    """The paper's rule on the incremental state (kept across calls) against a fresh state
    built from the store alone (another process, a restart) at every call."""
    cfg = FlexAMemConfig(budget=budget, mode=mode, cache_stable=False)
    store = InMemoryStore()
    live = FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder)
    for h in model_calls(history):
        try:
            r = live.render(h)
        except BudgetError:
            return
        fresh = FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder).render(h)
        assert [m.to_dict() for m in fresh.messages] == [m.to_dict() for m in r.messages]
        assert fresh.memory_text == r.memory_text and fresh.tokens == r.tokens


@pytest.mark.parametrize("mode", ["unit", "auto"])
def test_a_restart_continues_the_saved_request(tokenizer, hashing_embedder, long_run, mode):
    """The store keeps each thread's previous request (``RequestStates``): an instance made
    after a restart sends exactly what the instance before it would have sent, the first
    call (a retry of the last one) included."""
    cfg = FlexAMemConfig(budget=3000, mode=mode)
    store = InMemoryStore()
    calls = model_calls(long_run)
    live = FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder)
    never_restarted = FlexAMem(cfg, store=InMemoryStore(), tokenizer=tokenizer, embedder=hashing_embedder)
    for h in calls[:-3]:
        live.render(h)
        never_restarted.render(h)
    restarted = FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder)
    got = [restarted.render(h) for h in calls[-4:]]
    want = [never_restarted.render(h) for h in calls[-4:]]
    assert [r.messages for r in got] == [r.messages for r in want]
    assert [r.report for r in got] == [json.loads(json.dumps(r.report)) for r in want]
    assert got[0].report["cache"] == {"step": "append", "appended": True, "appended_messages": 0,
                                      "reused_prefix_tokens": got[0].tokens}
    assert len(store.notes("default")) == len(never_restarted.store.notes("default")), "nothing written twice"


def test_a_fork_served_by_another_instance_renders_as_in_one_instance(tokenizer, hashing_embedder, long_run):
    """A history that does not continue the saved request (a fork) is rendered afresh against
    that request (its report measured against it), whichever instance made the request."""
    cfg = FlexAMemConfig(budget=3000)
    store = InMemoryStore()
    calls = model_calls(long_run)
    fork = [*calls[30], {"role": "assistant", "content": "THOUGHT: another way\n```bash\nls\n```", "id": "fork"}]
    first, second = (FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=hashing_embedder) for _ in range(2))
    one = FlexAMem(cfg, store=InMemoryStore(), tokenizer=tokenizer, embedder=hashing_embedder)
    for h in calls[:36]:
        first.render(h)
        one.render(h)
    got, want = second.render(fork), one.render(fork)
    assert got.messages == want.messages and got.report == json.loads(json.dumps(want.report))
    assert got.report["cache"]["step"] == "render"


@pytest.fixture(scope="module")
def long_run() -> list[dict]:
    return text_action_run(40)


def test_an_extension_moves_every_unit_it_can_into_the_memory(tokenizer, hashing_embedder):
    """Whichever units leave the window, everything after the previous memory is sent again:
    by default an extension leaves only the newest unit (while the memory stays within its
    cap), so the request shrinks the most, fewer calls extend, and fewer tokens go uncached
    than when it keeps the longest window within ``stable_target``."""
    got, history = {}, text_action_run(60)  # a window of several units: 6k tokens of 500-token units
    for extend in ("evict_all", "to_target"):
        cfg = FlexAMemConfig(budget=6000, tuning=Tuning(stable_extend=extend, agent_unit_tokens=500))
        calls = [r for r in run(FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder), history)
                 if not r.passthrough]
        steps = [r.report["cache"]["step"] for r in calls]
        windows = [r.report["window_units"] for r, step in zip(calls, steps) if step == "extend"]
        uncached = sum(r.tokens - r.report["cache"]["reused_prefix_tokens"] for r in calls)
        got[extend] = steps, windows, uncached
        assert all(r.tokens <= cfg.effective_budget for r in calls)
    steps, windows, uncached = got["evict_all"]
    target_steps, target_windows, target_uncached = got["to_target"]
    assert windows and set(windows) == {1}, "every unit but the newest went into the memory"
    assert max(target_windows) > 1, "the target keeps a longer window"
    assert steps.count("extend") < target_steps.count("extend")
    assert uncached < target_uncached


def test_appending_is_the_commonest_step_and_the_report_says_so(tokenizer, hashing_embedder, long_run):
    """Appends are the commonest step (on these identifier-dense outputs every extension also
    adds what old steps revealed, so extensions come often too)."""
    results = run(FlexAMem(FlexAMemConfig(budget=4000), tokenizer=tokenizer, embedder=hashing_embedder), long_run)
    steps = [r.report["cache"]["step"] for r in results if not r.passthrough]
    assert Counter(steps).most_common(1)[0][0] == "append" and steps.count("append") >= len(steps) / 3
    assert "extend" in steps, "the memory grows at its end before it is rendered again"
    per_call = run(FlexAMem(FlexAMemConfig(budget=4000, cache_stable=False), tokenizer=tokenizer,
                            embedder=hashing_embedder), long_run)
    stable_reused = sum(r.report["cache"]["reused_prefix_tokens"] for r in results)
    per_call_reused = sum(common_prefix_tokens(a.messages, b.messages, tokenizer)
                          for a, b in zip(per_call, per_call[1:]))
    assert stable_reused > 1.5 * per_call_reused


def test_an_edited_history_is_rendered_again_not_appended(tokenizer, hashing_embedder, long_run):
    mem = FlexAMem(FlexAMemConfig(budget=3000), tokenizer=tokenizer, embedder=hashing_embedder)
    calls = model_calls(long_run)
    for h in calls[:20]:
        mem.render(h)
    edited = copy.deepcopy(calls[20])
    assert edited[10]["role"] == "assistant"
    edited[10]["content"] = "THOUGHT: a different action\n```bash\nls -la\n```"  # same id, new text
    r = mem.render(edited)
    assert r.report["cache"]["step"] == "render"
    assert structure_problem(r.messages) is None and r.tokens <= int(3000 * 0.95)
    sent = "\n".join(m.text for m in r.messages)
    assert "look at part 4" not in sent, "nothing of the edited-away step is sent"


def test_a_new_budget_is_rendered_again(tokenizer, hashing_embedder, long_run):
    mem = FlexAMem(FlexAMemConfig(budget=3000), tokenizer=tokenizer, embedder=hashing_embedder)
    calls = model_calls(long_run)
    for h in calls[:20]:
        mem.render(h)
    r = mem.render(calls[21], budget=2500)
    assert r.report["cache"]["step"] == "render" and r.tokens <= int(2500 * 0.95)


def test_the_paper_rule_renders_every_call(tokenizer, hashing_embedder, long_run):
    results = run(FlexAMem(FlexAMemConfig(budget=3000, cache_stable=False), tokenizer=tokenizer,
                           embedder=hashing_embedder), long_run)
    assert all("cache" not in r.report for r in results)


@pytest.mark.parametrize("mode", ["unit", "piece"])
def test_a_render_embeds_only_its_query(mode, tokenizer, hashing_embedder, long_run):
    counting = CountingEmbedder(hashing_embedder)
    mem = FlexAMem(FlexAMemConfig(budget=3000, mode=mode, cache_stable=False), tokenizer=tokenizer,
                   embedder=counting)
    mem.ingest(long_run)  # every complete unit written (and embedded) before the renders
    embedded = []
    for h in model_calls(long_run)[-10:]:
        counting.calls.clear()
        r = mem.render(h)
        assert not r.passthrough
        # the task and the newest unit's head (each embedded alone), or nothing where the head is
        # the last call's (a step added to the open unit leaves its head, and so the vector, as it was)
        assert counting.calls in ([1, 1], []), "one query embedding at most, nothing else"
        embedded.append(counting.calls == [1, 1])
    assert any(embedded) and not all(embedded), embedded


@pytest.mark.parametrize("mode", ["unit", "piece", "auto"])
def test_a_cache_stable_call_embeds_its_query_once(mode, tokenizer, hashing_embedder, long_run):
    """An appended call embeds nothing; a call that extends, or renders again at another
    budget after a first try, embeds its query once (the same texts are asked again)."""
    counting = CountingEmbedder(hashing_embedder)
    mem = FlexAMem(FlexAMemConfig(budget=3000, mode=mode), tokenizer=tokenizer, embedder=counting)
    mem.ingest(long_run)
    seen: dict[str, set[tuple[int, ...]]] = {}
    for h in model_calls(long_run):
        counting.calls.clear()
        r = mem.render(h)
        step = "passthrough" if r.passthrough else r.report["cache"]["step"]
        seen.setdefault(step, set()).add(tuple(counting.calls))
        if step in ("append", "passthrough"):
            assert counting.calls == [], step
        else:  # an extend with no room for detail needs no query
            assert counting.calls in ([], [1, 1]), (step, counting.calls)
    assert {"append", "render"} <= set(seen)
    if mode == "auto":  # nothing asked, so nothing ranked by meaning: no model call on the path
        assert all(calls == () for calls_seen in seen.values() for calls in calls_seen), seen
    else:
        assert (1, 1) in seen["render"]


def test_the_first_render_keeps_the_oldest_units_where_they_were_sent(tokenizer, hashing_embedder, long_run):
    """``stable_head``: the first render after the history was sent whole keeps its oldest
    units as their messages right after the fixed prompt, so they stay a cached prefix; the
    memory still holds a record of every other old unit; extensions keep that head and the
    next render drops it."""
    reused = {}
    for head in (True, False):
        cfg = FlexAMemConfig(budget=6000, tuning=Tuning(stable_head=head))
        results = run(FlexAMem(cfg, tokenizer=tokenizer, embedder=hashing_embedder), long_run)
        first = next(i for i, r in enumerate(results) if not r.passthrough)
        r, before = results[first], results[first - 1]
        reused[head] = r.report["cache"]["reused_prefix_tokens"]
        if not head:
            assert "head_units" not in r.report
            continue
        n_head = r.report["head_messages"]
        fixed = 2  # the system prompt and the task
        assert r.report["head_units"] >= 1 and n_head >= 2
        assert r.messages[:fixed + n_head] == before.messages[:fixed + n_head], "sent where they were"
        assert r.messages[fixed + n_head].metadata.get("flexamem") == "memory"
        assert reused[head] >= count_messages(r.messages[:fixed + n_head], tokenizer) - 3
        assert r.report["resolutions"]["hidden"] == 0, "a record of every other old unit"
        assert r.report["resolutions"]["raw"] >= r.report["head_units"]
        assert [row["resolution"] for row in r.report["units"][:r.report["head_units"]]] == \
            ["raw"] * r.report["head_units"]
        later = results[first + 1:]
        steps = [x.report["cache"]["step"] for x in later]
        assert "extend" in steps and "render" in steps, steps
        until = steps.index("render")
        for x, step in zip(later[:until], steps[:until]):
            assert x.messages[:fixed + n_head] == r.messages[:fixed + n_head], step
            assert x.tokens <= cfg.effective_budget
        assert "head_units" not in later[until].report, "the next render drops the head"
    assert reused[True] > reused[False]


@pytest.mark.parametrize("budget", [2500, 5000])
def test_a_memory_that_can_grow_no_more_is_compacted_behind_its_leading_records(budget, tokenizer,
                                                                               hashing_embedder):
    """Past its cap the memory keeps its leading record lines as they were sent (a cached prefix)
    and shows every later unit in a timeline of its own, in order, no step missing."""
    mem = FlexAMem(FlexAMemConfig(budget=budget), tokenizer=tokenizer, embedder=hashing_embedder)
    calls = run(mem, text_action_run(80))
    steps = [r.report["cache"]["step"] for r in calls]
    assert "compact" in steps, steps
    for previous, r, step in zip(calls, calls[1:], steps[1:]):
        assert r.tokens <= int(budget * 0.95)
        if step != "compact":
            continue
        kept = r.report["cache"]["kept_memory_chars"]
        assert r.memory_text[:kept] == previous.memory_text[:kept]
        # the fixed prompt and the kept lines are read from the cache
        assert r.report["cache"]["reused_prefix_tokens"] >= tokenizer.count(previous.memory_text[:kept])
        labels = [(int(a), int(b or a)) for a, b in
                  re.findall(r"^- \[steps? (\d+)(?:-(\d+))?\]", r.memory_text, re.M)]
        assert all(b[0] == a[1] + 1 for a, b in zip(labels, labels[1:])), labels  # in time order, no gap
        newest_old = labels[-1][1]
        at = next(i for i, m in enumerate(r.messages) if m.metadata.get("flexamem") == "memory")
        first_window = int(re.search(r"look at part (\d+)", r.messages[at + 1].content).group(1)) + 1
        assert first_window == newest_old + 1, "the records reach the recent window"
