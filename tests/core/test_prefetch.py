"""Vectors computed while the host waits for its model: after a render whose open unit the
next step closes as it stands, the embedder embeds that unit's notes on a background thread,
so the next call writes the unit without a model call of its own; every embedding waits for
the background work first, so requests are byte-identical however slow that work is, and the
same as with no prefetch at all."""

from __future__ import annotations

import json
import logging
import time

import numpy as np

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.config import Tuning
from flexamem_core.model.messages import as_messages
from flexamem_core.request.tokens import default_tokenizer
from flexamem_core.write.units import closes_as_is, pack_units
from flexamem_core.write.writers import LLMRecordWriter, RuleRecordWriter
from tests.core.checks import RecordingEmbedder, steps

TASK = "Fix the failing test in notes.py"
CONFIG = FlexAMemConfig(budget=1500, tuning=Tuning(agent_unit_tokens=300))


def _history(n: int) -> list[dict]:
    return [{"role": "system", "content": "You are a shell agent."}, {"role": "user", "content": TASK},
            *steps(n, size=60)]


def _loop(embedder: RecordingEmbedder, n_steps: int, pause: float = 0.0) -> tuple[list[str], FlexAMem]:
    """The requests of an agent loop, one render per step, as chat-completions JSON."""
    mem = FlexAMem(CONFIG, embedder=embedder)
    sent = []
    for n in range(1, n_steps + 1):
        out = mem.render(_history(n))
        sent.append(json.dumps([m.to_dict() for m in out.messages], sort_keys=True))
        time.sleep(pause)
    return sent, mem


def test_the_next_call_finds_the_closing_units_notes_embedded(shared):
    e = RecordingEmbedder(shared)
    mem = FlexAMem(CONFIG, embedder=e)
    closing_seen = 0
    for n in range(1, 25):
        mem.render(_history(n))
        e.wait()
        before = len(e.encoded)
        written = len(mem.state().index.notes)
        mem.render(_history(n + 1))
        e.wait()
        if len(mem.state().index.notes) > written:  # this call wrote a unit
            closing_seen += 1
            on_call = [t for name, t in e.encoded[before:] if name != "flexamem-prefetch"]
            assert not any(t.startswith("step ") for t in on_call), "the written unit's note was embedded before"
    assert closing_seen >= 3
    background = [t for name, t in e.encoded if name == "flexamem-prefetch"]
    assert background[0] == TASK, "the task first, on the first call (the history passes through)"
    assert len(background) > 1 and all(t.startswith("step ") for t in background[1:]), "then notes"
    on_calls = [t for name, t in e.encoded if name != "flexamem-prefetch"]
    assert TASK not in on_calls, "no query embeds the task on its call"


class CountingRuleWriter(RuleRecordWriter):
    """The rule writer, counting the records it writes."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[str] = []

    def write(self, unit):
        self.written.append(unit.key)
        return super().write(unit)


def test_each_record_is_written_once_the_prefetch_making_it_for_the_write(shared):
    e, writer = RecordingEmbedder(shared), CountingRuleWriter()
    mem = FlexAMem(CONFIG, embedder=e, writer=writer)
    for n in range(1, 25):
        mem.render(_history(n))
        time.sleep(0.05)
    e.wait()
    keys = [n.unit_key for n in mem.state().index.notes]
    assert len(keys) >= 5
    assert len(writer.written) == len(set(writer.written)), "one record per unit: the write used the prefetch's"
    assert set(keys) <= set(writer.written) and len(set(writer.written) - set(keys)) <= 1, \
        "and one for the open unit the next step would close"


def test_requests_are_the_same_whatever_the_background_threads_timing(shared):
    fast, fast_mem = _loop(RecordingEmbedder(shared), 24)
    slow, slow_mem = _loop(RecordingEmbedder(shared, delay=0.3), 24)
    none, none_mem = _loop(RecordingEmbedder(shared, prefetching=False), 24)
    assert fast == slow == none
    vectors = [np.stack([n.embedding for n in m.state().index.notes]) for m in (fast_mem, slow_mem, none_mem)]
    assert len(vectors[0]) >= 5
    assert all(np.array_equal(vectors[0], v) for v in vectors[1:]), "the stored vectors, bit for bit"


def test_a_pause_lets_the_work_finish_off_the_call(shared):
    e = RecordingEmbedder(shared)
    _loop(e, 16, pause=0.5)
    background = [t for name, t in e.encoded if name == "flexamem-prefetch"]
    on_call_notes = [t for name, t in e.encoded if name != "flexamem-prefetch" and t.startswith("step ")]
    assert len(background) >= 3 and on_call_notes == []


def test_a_failed_prefetch_is_logged_and_the_call_embeds_for_itself(shared, caplog):
    e = RecordingEmbedder(shared)
    with caplog.at_level(logging.WARNING, logger="flexamem"):
        e.prefetch(lambda: [1 / 0])  # type: ignore[list-item]
        vec = e.embed(["ls -la"])
    assert "prefetching embeddings failed" in caplog.text
    assert vec.shape == (1, e.dim) and abs(float(np.linalg.norm(vec)) - 1) < 1e-5


def test_an_llm_writer_is_not_asked_twice(shared):
    asked: list[int] = []

    def chat(messages):
        asked.append(1)
        return json.dumps({"record": "ran cat on a notes file", "keywords": ["notes"], "tags": ["cat"],
                           "description": "cat"})

    e = RecordingEmbedder(shared)
    mem = FlexAMem(CONFIG, embedder=e, writer=LLMRecordWriter(chat))
    for n in range(1, 20):
        mem.render(_history(n))
    e.wait()
    assert asked and len(asked) == len(mem.state().index.notes)
    assert [t for name, t in e.encoded if name == "flexamem-prefetch"] == [TASK], "no note: only the task"


def test_only_a_full_agent_unit_closes_as_it_stands():
    tk = default_tokenizer()
    agent = pack_units(as_messages(steps(3, size=60)), "agent", tk, 300)
    assert not closes_as_is(agent[-1], "agent", 300), "three short steps: still open for more"
    full = pack_units(as_messages(steps(8, size=60)), "agent", tk, 300)
    assert closes_as_is(full[-1], "agent", 300) == (full[-1].tokens >= 300)
    assert any(closes_as_is(p, "agent", 300) for p in
               (pack_units(as_messages(steps(k, size=60)), "agent", tk, 300)[-1] for k in range(1, 10)))
    chat = pack_units(as_messages([{"role": "user", "content": "hi " * 400}]), "reader", tk, 300)
    assert not closes_as_is(chat[-1], "reader", 300), "a chat span's end depends on the next turn"
