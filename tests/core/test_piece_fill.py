"""Piece vectors after the call: a catch-up over a chat history writes its pieces without their
own vectors (ranked by their unit's for that call), they are embedded on the background thread
while the host waits for its model, and the next call, in this process or another, fills what
is missing before it renders; requests are the same however slow that work is."""

from __future__ import annotations

import json

import numpy as np
import pytest

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.config import Tuning
from flexamem_core.stores.sqlite import SQLiteStore
from tests.core.checks import RecordingEmbedder

CONFIG = FlexAMemConfig(budget=700, history="reader", tuning=Tuning(reader_unit_tokens=160, piece_tokens=40))
PLACES = ["the attic", "the garage", "the blue box", "my office", "the shed", "the car", "the kitchen drawer"]
THINGS = ["passport", "guitar", "tax papers", "bike pump", "grandma's ring", "spare keys", "telescope"]


def _chat(n_pairs: int) -> list[dict]:
    """A conversation of short turns, each naming where something was put, ending on a question."""
    out = []
    for i in range(n_pairs):
        thing, place = THINGS[i % len(THINGS)], PLACES[(3 * i) % len(PLACES)]
        out += [{"role": "user", "content": f"Day {i + 1}: I put the {thing} in {place} after cleaning up."},
                {"role": "assistant", "content": f"Noted: on day {i + 1} the {thing} went to {place}."}]
    return out


def _ask(history: list[dict], question: str) -> list[dict]:
    return [*history, {"role": "user", "content": question}]


def _sent(mem: FlexAMem, history: list[dict]) -> str:
    return json.dumps([m.to_dict() for m in mem.render(history).messages], sort_keys=True)


def _stored(mem: FlexAMem) -> list:
    return list(mem.store.iter_pieces("default"))


def test_a_catch_up_leaves_its_pieces_vectors_to_the_background_and_the_next_call(shared):
    e = RecordingEmbedder(shared)
    mem = FlexAMem(CONFIG, embedder=e)
    history = _ask(_chat(30), "Where is the telescope?")
    mem.render(history)
    index = mem.state().index
    assert len(index.notes) >= 4
    assert index.own_piece_vectors == 0 and all(p.embedding is None for p in _stored(mem))
    e.wait()
    texts = [p.text for p in _stored(mem)]
    assert {t for name, t in e.encoded if name == "flexamem-prefetch"} >= set(texts)

    before = len(e.encoded)
    mem.render(_ask(history, "And the passport?"))
    assert index.own_piece_vectors == len(index.doc_unit)
    assert not set(texts) & {t for _, t in e.encoded[before:]}  # read from the cache: not embedded again
    stored = _stored(mem)
    assert all(p.embedding is not None for p in stored)
    alone = shared.embed([p.text for p in stored])
    got = np.stack([p.embedding for p in stored])
    assert float(np.min(np.sum(got * alone, axis=1))) > 0.9999  # each piece's own vector
    np.testing.assert_array_equal(index.piece_vectors[: len(stored)], got)


@pytest.mark.parametrize("worker", ["slowed", "absent"])
def test_requests_are_byte_identical_whatever_the_background_timing(shared, worker):
    turns = _chat(40)
    calls = [_ask(turns[:60], "Where is the guitar?")] + [
        _ask(turns[:60 + 2 * k], q) for k, q in enumerate(["Where is the bike pump?", "Where did the ring go?",
                                                          "What went to the shed?"], start=1)]
    fast = FlexAMem(CONFIG, embedder=RecordingEmbedder(shared))
    other = FlexAMem(CONFIG, embedder=RecordingEmbedder(shared, delay=1.5) if worker == "slowed"
                     else RecordingEmbedder(shared, prefetching=False))
    assert [_sent(fast, h) for h in calls] == [_sent(other, h) for h in calls]
    assert fast.state().index.own_piece_vectors == len(fast.state().index.doc_unit)


def test_another_process_fills_what_a_catch_up_left_and_sends_the_same_request(shared, tmp_path):
    path = tmp_path / "memory.db"
    first = FlexAMem(CONFIG, store=SQLiteStore(path), embedder=RecordingEmbedder(shared, prefetching=False))
    history = _ask(_chat(30), "Where is the telescope?")
    first.render(history)
    assert all(p.embedding is None for p in first.store.iter_pieces("default"))

    second = FlexAMem(CONFIG, store=SQLiteStore(path), embedder=RecordingEmbedder(shared))
    following = _ask(history, "And the spare keys?")
    from_second = _sent(second, following)
    assert all(p.embedding is not None for p in SQLiteStore(path).iter_pieces("default"))
    assert _sent(first, following) == from_second
    index = second.state().index
    assert index.own_piece_vectors == len(index.doc_unit)


def test_one_unit_per_call_embeds_its_pieces_with_it(shared):
    """A conversation written as it happens never waits for a fill: each call writes one unit."""
    e = RecordingEmbedder(shared)
    mem = FlexAMem(CONFIG, embedder=e)
    turns = _chat(20)
    for n in range(2, len(turns) + 1, 2):
        mem.render(_ask(turns[:n], "Where is the guitar?"))
        index = mem.state().index
        assert index.own_piece_vectors == len(index.doc_unit)
    assert len(mem.state().index.notes) >= 3
