"""The store guarantees seen through the core's render, on every backend.

A render after reopening equals the render before; a canary planted in one tenant never
reaches another tenant's render (BM25 IDF and vector search are per namespace); a
forgotten unit never reaches a render again.
"""

from __future__ import annotations

import json

import pytest
from conftest import _make_backend

from flexamem_core import FlexAMem, FlexAMemConfig, Message, ToolCall, Tuning

CANARY = "quokkacanary5521"
BUDGET = 1400


@pytest.fixture(params=["sqlite", "postgres", "chroma", "chroma-http", "langgraph-sqlite"])
def persistent_backend(request, tmp_path):
    yield from _make_backend(request.param, tmp_path)


# Chroma: store-level isolation suffices
@pytest.fixture(params=["memory", "sqlite", "postgres", "langgraph-memory", "langgraph-sqlite"])
def render_backend(request, tmp_path):
    yield from _make_backend(request.param, tmp_path)


def agent_history(tag: str, steps: int = 12, canary_step: int | None = None) -> list[Message]:
    msgs = [Message(role="system", content="You are a coding agent.", id=f"{tag}-sys"),
            Message(role="user", content=f"Fix the failing tests of project {tag}.", id=f"{tag}-task")]
    for i in range(1, steps + 1):
        call = ToolCall(name="bash", arguments=json.dumps({"cmd": f"cat src/{tag}/module_{i}.py"}),
                        id=f"{tag}-c{i}")
        lines = [f"def function_{i}_{j}(x):  # {tag} module {i}" for j in range(7)]
        if i == canary_step:
            lines.insert(5, f"API_TOKEN = '{CANARY}'  # secret of {tag}")
        msgs.append(Message(role="assistant", content="", tool_calls=(call,), id=f"{tag}-a{i}"))
        msgs.append(Message(role="tool", content="\n".join(lines), tool_call_id=f"{tag}-c{i}",
                            id=f"{tag}-t{i}"))
    return msgs


def flexamem(store, tokenizer, embedder, mode: str = "unit") -> FlexAMem:
    return FlexAMem(FlexAMemConfig(budget=BUDGET, mode=mode, tuning=Tuning(agent_unit_tokens=300)), store=store,
                    tokenizer=tokenizer, embedder=embedder)


def rendered_text(r) -> str:
    return "\n".join(m.text for m in r.messages)


def test_render_after_reopening_is_the_same(persistent_backend, tokenizer, embedder):
    backend = persistent_backend
    history = agent_history("rs")
    first = flexamem(backend.first, tokenizer, embedder).render(history, namespace="agent/1")
    assert not first.passthrough and first.memory_text
    backend.first.close()

    class Counting:  # the real embedder, counting how many texts it is asked to embed
        name, dim, texts = embedder.name, embedder.dim, 0

        def embed(self, texts):
            Counting.texts += len(texts)
            return embedder.embed(texts)

    reopened = backend.open()
    again = flexamem(reopened, tokenizer, Counting()).render(history, namespace="agent/1")
    assert [m.to_dict() for m in again.messages] == [m.to_dict() for m in first.messages]
    assert again.memory_text == first.memory_text
    assert Counting.texts < len(reopened.notes("agent/1"))  # the query only: notes are not re-embedded


def test_canary_never_reaches_another_tenants_render(render_backend, tokenizer, embedder):
    unit_mem = flexamem(render_backend.first, tokenizer, embedder, "unit")
    piece_mem = flexamem(render_backend.first, tokenizer, embedder, "piece")
    question = f"What is the API token {CANARY}?"
    owner = piece_mem.render(agent_history("alpha", canary_step=3), namespace="tenant-a/t1", query=question)
    assert CANARY in owner.memory_text  # the owner's memory does find it
    for ns, tag in (("tenant-b/t1", "beta"), ("tenant-a/t2", "gamma")):
        for mem in (unit_mem, piece_mem):
            r = mem.render(agent_history(tag), namespace=ns, query=question)
            assert r.memory_text and CANARY not in rendered_text(r)
        q = piece_mem.render_question(question, namespace=ns)
        assert q.memory_text and CANARY not in q.memory_text


def test_forgotten_unit_never_reaches_a_render(render_backend, tokenizer, embedder):
    backend, store, ns = render_backend, render_backend.first, "user-9"
    history = agent_history("fg", canary_step=4)
    question = f"What is the API token {CANARY}?"
    before = flexamem(store, tokenizer, embedder, "piece").render(history, namespace=ns, query=question)
    assert CANARY in before.memory_text
    secret = [n.unit_key for n in store.notes(ns) if CANARY in store.get_unit(ns, n.unit_key).raw]
    assert len(secret) == 1
    assert store.delete_unit(ns, secret[0])
    assert CANARY not in backend.raw_dump(store)
    # the user's later history no longer holds the secret step; every stored piece is searched
    cleaned = [m for m in history if m.id not in {"fg-a4", "fg-t4"}]
    fresh = flexamem(backend.open(), tokenizer, embedder, "piece")
    after = fresh.render(cleaned, namespace=ns, query=question)
    assert after.memory_text and CANARY not in rendered_text(after)
    assert CANARY not in json.dumps(after.report)
