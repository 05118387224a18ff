"""Note vectors after the call: a long catch-up indexes its notes with their records at once
and embeds them on the background thread while the host waits for its model. The store then
holds exactly what an immediate write stores, the requests are byte-identical however slow
the thread is, and anything that reads a vector first finishes the notes still without one."""

from __future__ import annotations

import json
import logging

import numpy as np

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.config import Tuning
from flexamem_core.render.note_fill import DEFER_UNITS
from flexamem_core.stores.sqlite import SQLiteStore
from tests.core.checks import RecordingEmbedder, steps

TASK = "Fix the failing test in notes.py"
CONFIG = FlexAMemConfig(budget=1500, tuning=Tuning(agent_unit_tokens=300))


def _history(n: int) -> list[dict]:
    return [{"role": "system", "content": "You are a shell agent."}, {"role": "user", "content": TASK},
            *steps(n, size=60)]


#: A resumed history long enough to be a long catch-up (at least DEFER_UNITS units).
LONG = 160


def _sent(out) -> str:
    return json.dumps([m.to_dict() for m in out.messages], sort_keys=True)


def _stored(mem: FlexAMem) -> list:
    return mem.store.notes("default")


def _same_notes(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x == y and x.links == y.links and np.array_equal(x.embedding, y.embedding)
                                    for x, y in zip(a, b))


def test_a_long_catch_up_stores_its_notes_after_the_call_exactly_as_at_once(shared):
    background = RecordingEmbedder(shared)
    mem = FlexAMem(CONFIG, embedder=background)
    at_once = FlexAMem(CONFIG, embedder=RecordingEmbedder(shared, prefetching=False))
    first = mem.render(_history(LONG))
    state = mem.state()
    assert len(state.index.pending) >= DEFER_UNITS, "a long catch-up: notes indexed without their vectors"
    assert _stored(mem) == [], "and not stored until they have them"
    assert not any(name != "flexamem-prefetch" and t.startswith("step ") for name, t in background.encoded), \
        "no note was embedded on the call"
    assert _sent(first) == _sent(at_once.render(_history(LONG))), "the same request as an immediate write"
    background.wait()
    mem.render(_history(LONG + 1))  # the next call finishes what the thread embedded
    assert state.index.pending == [] and not state.backlog
    assert _same_notes(_stored(mem)[:len(_stored(at_once))], _stored(at_once)), \
        "the stored notes, vectors and links bit for bit those of the immediate write"


def test_requests_are_byte_identical_whatever_the_threads_timing(shared):
    def loop(embedder: RecordingEmbedder) -> tuple[list[str], FlexAMem]:
        mem = FlexAMem(CONFIG, embedder=embedder)
        sent = [_sent(mem.render(_history(n))) for n in (LONG, LONG + 1, LONG + 2, LONG + 3)]
        # a call that ranks by vector: it finishes every note first, whatever the thread did
        sent.append(_sent(mem.render(_history(LONG + 4), query="which note mentioned notes_17.txt?")))
        sent.append(_sent(mem.render(_history(LONG + 6))))
        return sent, mem

    fast, fast_mem = loop(RecordingEmbedder(shared))
    slow, slow_mem = loop(RecordingEmbedder(shared, delay=0.5))
    none, none_mem = loop(RecordingEmbedder(shared, prefetching=False))
    assert fast == slow == none
    assert _same_notes(_stored(fast_mem), _stored(slow_mem)) and _same_notes(_stored(fast_mem), _stored(none_mem))
    assert len(_stored(fast_mem)) > DEFER_UNITS


def test_a_slow_thread_leaves_notes_pending_and_a_vector_read_finishes_them(shared):
    slow = RecordingEmbedder(shared, delay=1.0)
    mem = FlexAMem(CONFIG, embedder=slow)
    mem.render(_history(LONG))
    mem.render(_history(LONG + 2))  # behind the backlog: its new unit waits with it
    state = mem.state()
    assert state.index.pending and len(_stored(mem)) < len(state.index.notes)
    out = mem.render(_history(LONG + 3), query="notes_3.txt")
    assert state.index.pending == [] and len(_stored(mem)) == len(state.index.notes)
    assert "notes_3.txt" in _sent(out)


def test_ingest_writes_every_vector_before_it_returns(shared):
    mem = FlexAMem(CONFIG, embedder=RecordingEmbedder(shared))
    written = mem.ingest(_history(LONG))
    assert written >= DEFER_UNITS and len(_stored(mem)) == written and mem.state().index.pending == []


def test_a_second_process_catches_up_what_the_first_left_pending(shared, tmp_path):
    path = tmp_path / "memory.db"
    first = FlexAMem(CONFIG, store=SQLiteStore(path), embedder=RecordingEmbedder(shared, delay=1.0))
    out = first.render(_history(LONG))
    # another process (a restart, a second worker) before the first stored anything: the
    # store holds none of it, the host's history all of it, so it writes the units itself
    second = FlexAMem(CONFIG, store=SQLiteStore(path), embedder=RecordingEmbedder(shared, prefetching=False))
    assert _sent(second.render(_history(LONG))) == _sent(out)
    n = len(_stored(second))
    assert n >= DEFER_UNITS
    first.ingest(_history(LONG))  # the first finishes: the units are stored once, the same notes
    assert _same_notes(_stored(first), _stored(second))


def test_the_log_says_the_vectors_follow(shared, caplog):
    mem = FlexAMem(CONFIG, embedder=RecordingEmbedder(shared))
    with caplog.at_level(logging.INFO, logger="flexamem"):
        mem.render(_history(LONG))
    assert "embedded in the background" in caplog.text


def test_a_question_over_the_stored_history_finishes_the_notes_first(shared):
    mem = FlexAMem(CONFIG, embedder=RecordingEmbedder(shared, delay=1.0))
    mem.render(_history(LONG))
    assert mem.state().index.pending
    out = mem.render_question("Which step printed note 3?")
    assert mem.state().index.pending == [] and len(_stored(mem)) == len(mem.state().index.notes)
    assert out.messages[-1].content == "Which step printed note 3?"
