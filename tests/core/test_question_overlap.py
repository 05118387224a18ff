"""A question's vector is embedded on the embedder's background thread while the render merges
the timeline on this one: the request is the one a render without that thread sends, and the
question's text reaches the model once, on that thread."""

from __future__ import annotations

import json

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.write.writers import LLMRecordWriter
from tests.core.checks import RecordingEmbedder

CONFIG = FlexAMemConfig(history="reader", mode="auto", budget=1200)
QUESTION = "Which city did Maria move to after the conference in 2021?"


def _conversation(n: int) -> list[dict]:
    out = []
    for i in range(n):
        out.append({"role": "user", "content": f"Day {i}: I met colleague number {i} at the office and we "
                                               f"talked about project {i % 7} and the budget of {1000 + i} euros."})
        out.append({"role": "assistant", "content": f"Noted day {i}. Project {i % 7} sounds busy; "
                                                    "tell me how the budget review goes."})
    out.append({"role": "user", "content": "By the way, Maria moved to Lisbon after the 2021 conference."})
    out.append({"role": "assistant", "content": "Lisbon, good to know."})
    out += [{"role": "user", "content": f"Later note {i}: nothing new on project {i % 5}."} for i in range(40)]
    return out


def _sent(out) -> str:
    return json.dumps([m.to_dict() for m in out.messages], sort_keys=True)


def test_the_question_is_embedded_beside_the_render_with_the_same_request(shared):
    history = _conversation(120)
    overlapped = RecordingEmbedder(shared)
    mem = FlexAMem(CONFIG, embedder=overlapped)
    mem.ingest(history, final=True)
    overlapped.encoded.clear()
    plain = FlexAMem(CONFIG, embedder=RecordingEmbedder(shared, prefetching=False))
    plain.ingest(history, final=True)
    first = mem.render_question(QUESTION)
    assert _sent(first) == _sent(plain.render_question(QUESTION))
    assert [t for _, t in overlapped.encoded] == [QUESTION], "the question alone, embedded once"
    assert overlapped.encoded[0][0] == "flexamem-prefetch", "on the background thread"
    assert _sent(mem.render_question(QUESTION)) == _sent(first), "and read from the cache the next time"
    assert "Lisbon" in _sent(first)


def test_an_llm_writer_merges_only_what_the_plan_asks_for(shared):
    merges: list[int] = []

    def chat(messages):
        if "Merge" in messages[0]["content"]:
            merges.append(1)
            return "merged records"
        return json.dumps({"record": "a day at the office", "keywords": ["office"], "tags": ["user"],
                           "description": "a day"})

    counts = []
    for embedder in (RecordingEmbedder(shared), RecordingEmbedder(shared, prefetching=False)):
        mem = FlexAMem(CONFIG, embedder=embedder, writer=LLMRecordWriter(chat))
        mem.ingest(_conversation(60), final=True)
        merges.clear()
        mem.render_question(QUESTION)
        counts.append(len(merges))
    assert counts[0] == counts[1], "no merge made ahead for a timeline the plan may not take"
