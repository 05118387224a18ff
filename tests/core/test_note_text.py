"""The text a note's vector is embedded from: an agent note's first ``NOTE_HEAD_CHARS``
characters (its record opens with the steps' commands and outcomes), a reader note's whole
record and fields; the stored note keeps its whole record and fields either way."""

from __future__ import annotations

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.write.notes import NOTE_HEAD_CHARS
from tests.core.checks import CountingEmbedder, steps

TASK = "Fix the failing test in notes.py"


def test_an_agent_note_is_embedded_from_the_head_of_its_record(hashing_embedder):
    emb = CountingEmbedder(hashing_embedder)
    mem = FlexAMem(FlexAMemConfig(budget=1500, cache_stable=False), embedder=emb)
    history = [{"role": "system", "content": "You are a shell agent."}, {"role": "user", "content": TASK},
               *steps(12, size=120)]
    mem.ingest(history, final=True)
    notes = list(mem.state("default").index.notes)
    assert len(notes) >= 3
    embedded = set(emb.texts)
    for note in notes:
        assert note.record.startswith("step ") and "cat notes_" in note.record
        whole = f"{note.record}\nkeywords: {', '.join(note.keywords)}"
        assert len(whole) > NOTE_HEAD_CHARS, "these records and fields run past the head"
        assert whole[:NOTE_HEAD_CHARS] in embedded, "the vector is the head's"
        assert not any(t.startswith(note.record) and len(t) > NOTE_HEAD_CHARS for t in embedded)
        assert note.keywords, "the stored note keeps its fields whole"


def test_a_reader_note_is_embedded_whole(hashing_embedder):
    emb = CountingEmbedder(hashing_embedder)
    mem = FlexAMem(FlexAMemConfig(history="reader", budget=1500, cache_stable=False, piece_vectors=False),
                   embedder=emb)
    turns = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": f"Turn {i}: Alice moved to Lisbon in May {2000 + i} and likes {i} kinds of tea. " * 8}
             for i in range(40)]
    mem.ingest(turns, final=True)
    notes = list(mem.state("default").index.notes)
    assert notes
    for note in notes:
        whole = (f"{note.record}\nkeywords: {', '.join(note.keywords)}\ntags: {', '.join(note.tags)}\n"
                 f"description: {note.description}")
        assert len(whole) > NOTE_HEAD_CHARS
        assert whole in emb.texts
