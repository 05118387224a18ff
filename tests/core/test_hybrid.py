"""Hybrid evidence selection: piece vectors written once, BM25 and cosine rankings fused,
compact framing charged before choosing. Real MiniLM, real tokenizer, real stores."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from flexamem_core import FlexAMem, FlexAMemConfig, Tuning
from flexamem_core.index.fusion import fuse, ranks
from flexamem_core.index.namespace import NamespaceIndex
from flexamem_core.recall.assembly import Assembler
from flexamem_core.recall.joins import PIECES_HEADER, group_header
from flexamem_core.recall.piece_recovery import piece_recovery
from flexamem_core.stores import InMemoryStore
from flexamem_core.stores.sqlite import SCHEMA_VERSION, SQLiteStore
from flexamem_core.write.units import reader_blocks, unit_label
from tests.conftest import flat_config

from .checks import CountingEmbedder

EVIDENCE = "Yesterday we finally adopted a golden retriever puppy from the shelter and named him Biscuit."
QUESTION = "What kind of dog did I get?"


def chat(sessions: int = 14) -> list[dict]:
    """Small talk in dated sessions; one turn answers the question without any of its words,
    and a few turns share its words ("kind", "get") but not its meaning."""
    msgs = []
    for s in range(sessions):
        meta = {"session": str(s), "date": f"2024-{s % 12 + 1:02d}-{s + 3:02d}"}
        for t in range(6):
            if s == 9 and t == 2:
                text = EVIDENCE
            elif t == 0 and s % 3 == 0:
                text = f"What kind of tea do you get in winter? Session {s} chat about hot drinks and mugs."
            else:
                text = (f"Session {s} turn {t}: we talked about the garden, watering tomatoes in the "
                        f"morning and moving the compost bin behind the shed.")
            msgs.append({"role": "user" if t % 2 == 0 else "assistant", "content": text, "metadata": meta})
    return msgs


def reader(embedder, tokenizer, store=None, **settings) -> FlexAMem:
    cfg = flat_config(**{"budget": 1200, "history": "reader", "mode": "piece", "piece_vectors": True,
                         **settings})
    return FlexAMem(cfg, store=store, tokenizer=tokenizer, embedder=embedder)


# -- fusion -------------------------------------------------------------------------------

def test_ranks_are_one_based_largest_first_ties_to_the_earlier():
    assert ranks(np.array([0.2, 0.9, 0.2, 0.5])).tolist() == [3, 1, 4, 2]


def test_rrf_adds_a_lexical_term_only_for_pieces_that_match_a_word():
    cfg = FlexAMemConfig(tuning=Tuning(fusion="rrf", fusion_k=60, fusion_weight=0.5))
    bm25 = np.array([0.0, 3.0, 1.0])
    cos = np.array([0.9, 0.1, 0.5])
    out = fuse(bm25, cos, cfg)
    np.testing.assert_allclose(out, [0.5 / 61, 0.5 / 61 + 0.5 / 63, 0.5 / 62 + 0.5 / 62])
    assert fuse(bm25, cos, cfg.tuned(fusion="bm25")).tolist() == bm25.tolist()
    blend = fuse(bm25, cos, cfg.tuned(fusion="blend"))
    np.testing.assert_allclose(blend, [0.5, 0.5 + 0.0, 0.5 / 3 + 0.5 * 0.5], atol=1e-9)


def test_fusion_shows_a_paraphrased_piece_that_bm25_alone_misses(embedder, tokenizer):
    """No word of the question is in the evidence turn: BM25 ranks it nowhere, the cosine of its
    stored vector (no model call at render) ranks it first, and the fusion shows it."""
    history = chat()
    lexical = reader(embedder, tokenizer, fusion="bm25")
    lexical.ingest(history, final=True)
    hybrid = reader(embedder, tokenizer, store=lexical.store)
    r_lex = lexical.render_question(QUESTION)
    r_hyb = hybrid.render_question(QUESTION)
    assert not r_lex.passthrough and not r_hyb.passthrough
    assert EVIDENCE not in (r_lex.memory_text or "")
    assert EVIDENCE in (r_hyb.memory_text or "")
    shown = [p for p in r_hyb.report["pieces"] if p["bm25"] == 0]
    assert shown, "the evidence piece matches no query word"
    index = hybrid.state("default").index
    q = embedder.embed([QUESTION])[0]
    cos = index.piece_cosines(None, q)
    best = int(np.argmax(cos))
    assert EVIDENCE in hybrid.store.pieces("default", index.doc_unit[best])[index.doc_piece[best]].text



def test_the_kept_cosines_are_those_of_the_current_query_and_pieces(embedder, tokenizer):
    """A render scores every old piece twice with one query vector: the second scoring reuses
    the first product, and a new query, a new unit or a loaded snapshot gets a fresh one."""
    mem = reader(embedder, tokenizer)
    history = chat()
    mem.ingest(history[:60], final=False)
    index = mem.state("default").index
    q1, q2 = embedder.embed([QUESTION, "Where is the compost bin?"])
    first = index.piece_cosines(None, q1)
    assert index.piece_cosines(None, q1) is first and not first.flags.writeable
    np.testing.assert_allclose(index.piece_cosines(np.arange(len(first)), q1), first)
    np.testing.assert_allclose(index.piece_cosines(None, q2), index.piece_vectors @ q2, rtol=1e-6)
    mem.ingest(history, final=True)  # more pieces: the product covers them
    grown = index.piece_cosines(None, q1)
    assert len(grown) > len(first)
    np.testing.assert_allclose(grown, index.piece_vectors @ q1, rtol=1e-6)
    np.testing.assert_allclose(grown[: len(first)], first, rtol=1e-6)

def test_a_render_embeds_its_question_only(embedder, tokenizer):
    counting = CountingEmbedder(embedder)
    mem = reader(counting, tokenizer)
    mem.ingest(chat(), final=True)
    counting.calls.clear()
    mem.render_question(QUESTION)
    mem.render_question("Where is the compost bin?")
    assert counting.calls == [1, 1]


# -- piece vectors at write ----------------------------------------------------------------

def test_pieces_are_embedded_once(embedder, tokenizer):
    """Ingesting a history embeds its notes, then all their pieces, each text once; a unit
    written alone embeds its notes and pieces in one call."""
    counting = CountingEmbedder(embedder)
    mem = reader(counting, tokenizer)
    history = chat(4)
    written = mem.ingest(history[:-6], final=True)
    index = mem.state("default").index
    n_pieces = len(index.doc_unit)
    assert written >= 2 and counting.calls == [written, n_pieces], "the notes, then all their pieces"
    pieces = list(mem.store.iter_pieces("default"))
    assert all(p.embedding is not None for p in pieces) and index.own_piece_vectors == n_pieces
    np.testing.assert_allclose(index.piece_vectors, embedder.embed([p.text for p in pieces]), atol=1e-6)
    mem.ingest(history[:-6], final=True)
    assert len(counting.calls) == 2, "an idempotent ingest embeds nothing"
    assert mem.ingest(history, final=True) == 1
    assert counting.calls[2:] == [1 + len(index.doc_unit) - n_pieces], "one call for the unit and its pieces"


def test_pieces_are_embedded_by_default_for_readers_only(embedder, tokenizer):
    """``piece_vectors=None`` (the default): a reader history's pieces get their own vectors,
    an agent's do not; an explicit setting wins either way."""
    agent_steps = [{"role": "user", "content": "Fix the failing test in tests/test_io.py"}]
    for i in range(12):
        agent_steps += [{"role": "assistant", "content": f"step {i}: run the tests",
                         "tool_calls": [{"id": f"c{i}", "type": "function",
                                         "function": {"name": "bash", "arguments": f'{{"cmd": "pytest -k t{i}"}}'}}]},
                        {"role": "tool", "tool_call_id": f"c{i}", "content": f"test t{i} FAILED at io.py:{i}\n" * 40}]
    assert FlexAMemConfig().piece_vectors is None
    owned = {}
    for history, pv in (("reader", None), ("agent", None), ("reader", False), ("agent", True)):
        cfg = FlexAMemConfig(budget=1200, history=history, piece_vectors=pv)
        assert cfg.embeds_pieces == (history == "reader" if pv is None else pv)
        mem = FlexAMem(cfg, tokenizer=tokenizer, embedder=embedder)
        mem.ingest(chat(4) if history == "reader" else agent_steps, final=True)
        index = mem.state("default").index
        assert len(index.doc_unit) > 0
        owned[(history, pv)] = index.own_piece_vectors
    assert owned[("reader", None)] > 0 and owned[("agent", True)] > 0
    assert owned[("agent", None)] == 0 and owned[("reader", False)] == 0


def test_without_piece_vectors_pieces_rank_by_their_units_vector(embedder, tokenizer):
    counting = CountingEmbedder(embedder)
    mem = reader(counting, tokenizer, piece_vectors=False)
    written = mem.ingest(chat(4), final=True)
    assert counting.calls == [written]
    index = mem.state("default").index
    assert index.own_piece_vectors == 0
    np.testing.assert_array_equal(index.piece_vectors, index.vectors[index.doc_note_array()])


def test_an_old_store_without_piece_vectors_keeps_working_and_gains_them(tmp_path, embedder, tokenizer):
    """A store written before piece vectors (schema 2: no column) is upgraded in place; its old
    pieces rank by their unit's vector until the first call with piece vectors on fills them
    (every piece's text embedded once), and a render then embeds only its question."""
    path = tmp_path / "old.db"
    history = chat(10)
    old = reader(embedder, tokenizer, store=SQLiteStore(path), piece_vectors=False)
    old.ingest(history[:30], final=True)
    old.store.close()
    conn = sqlite3.connect(path)  # back to schema 2: no embedding column
    conn.execute("ALTER TABLE pieces DROP COLUMN embedding")
    conn.execute("DELETE FROM schema_version WHERE version > 2")
    conn.commit()
    conn.close()
    counting = CountingEmbedder(embedder)
    store = SQLiteStore(path)
    assert store.schema_version == SCHEMA_VERSION == 5
    assert all(p.embedding is None for p in store.iter_pieces("default"))
    mem = reader(counting, tokenizer, store=store)
    index = mem.state("default").index
    n_old, n_old_notes = len(index.doc_unit), len(index.notes)
    np.testing.assert_array_equal(index.piece_vectors, index.vectors[index.doc_note_array()])
    mem.ingest(history, final=True)
    assert index.own_piece_vectors == len(index.doc_unit) > n_old
    assert sum(counting.calls) == len(index.notes) - n_old_notes + len(index.doc_unit)
    pieces = list(store.iter_pieces("default"))
    np.testing.assert_allclose(index.piece_vectors, embedder.embed([p.text for p in pieces]), atol=1e-6)
    counting.calls.clear()
    r = mem.render_question(QUESTION)
    assert counting.calls == [1] and r.memory_text
    reopened = NamespaceIndex(SQLiteStore(path), "default")
    np.testing.assert_array_equal(reopened.piece_vectors, index.piece_vectors)


def test_the_snapshot_keeps_the_piece_vectors(tmp_path, embedder, tokenizer):
    store = SQLiteStore(tmp_path / "s.db")
    mem = reader(embedder, tokenizer, store=store)
    mem.ingest(chat(), final=True)
    index = mem.state("default").index
    index.save(tokenizer.name)
    again = NamespaceIndex(SQLiteStore(tmp_path / "s.db"), "default")
    assert again.saved_covers == len(index.notes)
    np.testing.assert_array_equal(again.piece_vectors, index.piece_vectors)
    assert again.own_piece_vectors == index.own_piece_vectors == len(index.doc_unit)
    fresh = reader(embedder, tokenizer, store=SQLiteStore(tmp_path / "s.db"))
    assert fresh.render_question(QUESTION).memory_text == mem.render_question(QUESTION).memory_text


# -- compact framing ---------------------------------------------------------------------

def test_a_session_date_is_said_once_not_per_turn():
    msgs = [{"role": "user", "content": "hello", "metadata": {"date": "2024-05-01"}},
            {"role": "assistant", "content": "hi", "metadata": {"date": "2024-05-01"}},
            {"role": "user", "content": "later", "metadata": {"date": "2024-05-02"}}]
    from flexamem_core.model.messages import as_messages

    blocks = reader_blocks(as_messages(msgs))
    assert [b.header for b in blocks] == ["user:", "assistant:", "[2024-05-02] user:"]


@pytest.mark.parametrize("budget", [700, 1200, 2500])
def test_framing_is_charged_before_choosing_and_nothing_is_dropped(budget, embedder, tokenizer):
    """What the chosen pieces were charged (their tokens, the newlines, marks, labels, group
    headers and the pieces header) covers exactly what their text costs, within one token
    per piece; the shrink loop drops nothing and the allowance is used."""
    mem = reader(embedder, tokenizer, budget=budget)
    mem.ingest(chat(), final=True)
    space = mem.state("default")
    index, cfg = space.index, mem.config.with_budget(budget)
    notes = index.notes
    timeline = mem._pipeline.composer.timeline(index, cfg, notes, 0)
    room = budget // 2
    allowance = tokenizer.count(Assembler(timeline, tokenizer).text([])) + room
    r = piece_recovery(notes, timeline, QUESTION, embedder.embed([QUESTION])[0], room, allowance, index,
                       tokenizer, cfg)
    assert r.tokens <= allowance
    tail = PIECES_HEADER + r.text.split(PIECES_HEADER, 1)[1].removesuffix("\n</memory>")
    exact = tokenizer.count(tail) + 1  # and the newline that joins it to the timeline
    chosen, units = len(r.pieces), len({p["unit"] for p in r.pieces})
    assert chosen > 1
    # an upper bound: a newline that merges into the token before it, or a unit's closing '...'
    # charged though its last piece was taken after all, cost one token less than charged
    assert exact <= r.charged <= exact + chosen + units, (exact, r.charged, chosen, units)
    assert r.dropped == 0
    # one header per date, in time order, however many units of that date are shown
    labels = [n.label for n in notes if any(p["unit"] == n.unit_key for p in r.pieces)]
    assert [ln for ln in tail.split("\n") if ln.startswith("== [")] == \
        [group_header(lb) for k, lb in enumerate(labels) if k == 0 or labels[k - 1] != lb]
    full = mem.render_question(QUESTION, budget=budget)
    assert full.report["recovered_dropped"] == 0
    assert full.report["unused_allowance"] <= 40


def test_a_reader_unit_is_labelled_by_its_date(tokenizer):
    from flexamem_core.model.messages import as_messages
    from flexamem_core.write.units import pack_units, to_unit

    packed = pack_units(as_messages(chat(2)), "reader", tokenizer, 2000, final=True)
    units = [to_unit(p, "reader", None) for p in packed]
    assert [unit_label(u) for u in units] == ["2024-01-03", "2024-02-04"]
    assert "2024-01-03" not in units[0].raw, "the date is in the label, not on every turn"


def test_in_memory_store_round_trips_piece_vectors(embedder, tokenizer):
    store = InMemoryStore()
    mem = reader(embedder, tokenizer, store=store)
    mem.ingest(chat(3), final=True)
    for p in store.iter_pieces("default"):
        d = p.to_dict()
        again = type(p).from_dict(d)
        np.testing.assert_array_equal(again.embedding, p.embedding)
        assert again.embedding.dtype == np.float32
