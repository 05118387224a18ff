"""A reopen decodes every note and merged record of a namespace (``codec.notes_from_rows``,
``codec.merged_from_text``, with orjson where it reads the same): they read back exactly as
written, whatever their text, and the notes' embeddings are rows of one read-only matrix
instead of two copies per note."""

from __future__ import annotations

import dataclasses

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from flexamem_core.model.schema import MergedRecord, Note
from flexamem_core.stores import codec

TEXT = st.one_of(st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=40),
                 st.sampled_from(["$flexamem_str32", "$flexamem_map16", "\ud800", "\udfff\ud800", "NaN"]))
COUNTS = st.integers(min_value=0, max_value=2**62)


@st.composite
def notes(draw: st.DrawFn, dim: int) -> Note:
    return Note(unit_key=draw(TEXT), record=draw(TEXT), record_tokens=draw(COUNTS),
                keywords=tuple(draw(st.lists(TEXT, max_size=3))), tags=tuple(draw(st.lists(TEXT, max_size=2))),
                description=draw(TEXT), embedding=np.asarray(draw(st.lists(
                    st.floats(width=32, allow_nan=False), min_size=dim, max_size=dim)), dtype=np.float32),
                links=tuple(draw(st.lists(TEXT, max_size=3))), raw_tokens=draw(COUNTS),
                first_step=draw(COUNTS), last_step=draw(COUNTS), label=draw(TEXT), writer=draw(TEXT),
                llm_calls=draw(COUNTS), messages=draw(COUNTS), digest=draw(TEXT), counted_by=draw(TEXT))


def _rows(written: list[Note]) -> tuple[list[tuple[str, str, bytes]], list[tuple[str, str]]]:
    """Rows as a SQL store holds them: one per note, and one per link in link order."""
    rows = [(n.unit_key, codec.note_text(n), codec.embedding_bytes(n.embedding)) for n in written]
    links = [(n.unit_key, dst) for n in written for dst in n.links]
    return rows, links


def _assert_same(got: list[Note], written: list[Note]) -> None:
    assert len(got) == len(written)
    for a, b in zip(got, written):
        assert a.to_dict() == b.to_dict()
        for field in ("record", "unit_key", "digest"):  # code point by code point
            assert list(getattr(a, field)) == list(getattr(b, field))
        np.testing.assert_array_equal(a.embedding, b.embedding)
        assert a.embedding.dtype == np.float32
        assert a == b and hash(a) == hash(b) and vars(a).keys() == vars(b).keys()
        assert all(type(getattr(a, f)) is tuple for f in ("keywords", "tags", "links"))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_notes_read_back_exactly_whatever_their_text(data):
    dim = data.draw(st.integers(min_value=1, max_value=8))
    written = data.draw(st.lists(notes(dim), max_size=5, unique_by=lambda n: n.unit_key))
    rows, links = _rows(written)
    _assert_same(codec.notes_from_rows(rows, links), written)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_notes_kept_with_a_snapshot_read_back_exactly(data):
    """``notes_blob`` (orjson, or json when a string has a lone surrogate) and back."""
    dim = data.draw(st.integers(min_value=1, max_value=8))
    written = data.draw(st.lists(notes(dim), max_size=5))
    vectors = np.stack([n.embedding for n in written]) if written else np.zeros((0, dim), np.float32)
    _assert_same(codec.notes_from_blob(codec.notes_blob(written), vectors), written)


def test_notes_of_an_older_snapshot_read_back_with_the_fields_it_lacks_at_their_defaults():
    """A snapshot written before ``messages``, ``digest`` and ``counted_by`` existed, and one
    whose counts are not ints: read by ``Note.from_dict``, not by the fast path."""
    written = [Note(unit_key=f"u{i}", record=f"step {i}", record_tokens=3, keywords=("k",), tags=(), description="",
                    embedding=np.full(4, i, dtype=np.float32), links=(), raw_tokens=9, messages=2, digest="d2:x",
                    counted_by="o200k_base") for i in range(3)]
    old = [{k: v for k, v in n.to_dict(embedding=False).items() if k not in ("messages", "digest", "counted_by")}
           for n in written]
    old[1]["raw_tokens"] = 9.0
    vectors = np.stack([n.embedding for n in written])
    got = codec.notes_from_blob(orjson.dumps(old), vectors)
    assert [(n.messages, n.digest, n.counted_by) for n in got] == [(0, "", "")] * 3
    assert [type(n.raw_tokens) for n in got] == [int] * 3
    assert [dataclasses.replace(n, messages=2, digest="d2:x", counted_by="o200k_base") for n in got] == written


def test_embeddings_of_one_dimension_are_rows_of_one_read_only_matrix():
    rng = np.random.default_rng(0)
    written = [Note(unit_key=f"u{i}", record=f"step {i}", record_tokens=3, keywords=(), tags=(), description="",
                    embedding=rng.random(384, dtype=np.float32), links=(f"u{i - 1}",) if i else (), raw_tokens=9)
               for i in range(50)]
    got = codec.notes_from_rows(*_rows(written))
    _assert_same(got, written)
    first, last = got[0].embedding, got[-1].embedding
    assert np.shares_memory(first.base, last) and first.base is last.base  # one buffer, not a copy each
    assert not first.flags.writeable  # a note is write-once: its vector cannot be changed in place
    assert [n.links for n in got[:3]] == [(), ("u0",), ("u1",)]


def test_embeddings_of_different_dimensions_each_read_back():
    written = [Note(unit_key=k, record=k, record_tokens=1, keywords=(), tags=(), description="",
                    embedding=np.arange(d, dtype=np.float32), links=(), raw_tokens=1)
               for k, d in (("a", 3), ("b", 5), ("c", 3))]
    _assert_same(codec.notes_from_rows(*_rows(written)), written)
    assert codec.notes_from_rows([], []) == []


@settings(max_examples=150, deadline=None)
@given(st.builds(MergedRecord, key=TEXT, covers=st.lists(TEXT, max_size=4).map(tuple), text=TEXT, tokens=COUNTS,
                 level=COUNTS, writer=TEXT, line_tokens=COUNTS, line_counter=TEXT))
def test_merged_records_read_back_exactly_whatever_their_text(merged):
    got = codec.merged_from_text(codec.merged_text(merged))
    assert got == merged and [list(x) for x in (got.key, got.text)] == [list(x) for x in (merged.key, merged.text)]
