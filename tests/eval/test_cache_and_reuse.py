"""The on-disk embedding cache, notes written once per history, the buffer's fast path, flexamem-auto."""

from __future__ import annotations

import json
import multiprocessing
from dataclasses import replace

import numpy as np
import pytest

from flexamem_core import FlexAMemConfig, Message
from flexamem_core.index.embeddings import HashingEmbedder, SentenceTransformerEmbedder
from flexamem_eval.datasets import load
from flexamem_eval.embedding_cache import CachedEmbedder, default_cache_dir, text_key
from flexamem_eval.items import ConversationItem, TrajectoryItem
from flexamem_eval.methods import METHODS, make_method, method_class
from flexamem_eval.methods.base import Env
from flexamem_eval.methods.peers import LlamaIndexBuffer
from flexamem_eval.runner import ItemResult, Spec, evaluate_item

from .test_dev_data import LME, LOCOMO, TRAJ, dev_slices, needs_data
from .test_methods import conversation, trajectory

TEXTS = ["The dog's vaccine is due on 12 May.", "cd /repo && pytest -x tests/test_models.py",
         "", "a" * 3000, "Ünïcödé and emoji 🐕 text", "The dog's vaccine is due on 12 May."]
#: The methods that write the core's notes (they share one store per history).
NOTE_METHODS = ("flexamem-unit", "flexamem-unit-per-call", "flexamem-piece", "timeline-only",
                "flexamem-unit-no-excerpts", "random-candidates", "amem", "amem-fit-or-degrade")


# ------------------------------------------------------------------ the embedding cache

def test_cached_vectors_are_bit_for_bit_the_models(tmp_path):
    """Real MiniLM: the first call embeds (and stores), a new process-like instance reads the
    same bytes back without loading the model, and both equal a fresh model's vectors."""
    cached = CachedEmbedder(SentenceTransformerEmbedder(), tmp_path)
    first = cached.embed(TEXTS)
    assert cached.misses == len(set(TEXTS)) and first.dtype == np.float32 and first.shape == (len(TEXTS), 384)
    fresh = SentenceTransformerEmbedder().embed(TEXTS)
    assert np.array_equal(first, fresh)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)

    inner = SentenceTransformerEmbedder()
    again = CachedEmbedder(inner, tmp_path)
    second = again.embed(list(reversed(TEXTS)))
    assert np.array_equal(second, first[::-1])
    assert again.misses == 0 and again.hits == len(set(TEXTS))
    assert inner._model is None and inner.calls == 0, "a warm cache never loads the model"
    assert len(again) == len(set(TEXTS))
    assert again.embed([]).shape == (0, 384)


def test_cache_keys_by_model_and_exact_text(tmp_path):
    minilm = CachedEmbedder(SentenceTransformerEmbedder(), tmp_path)
    hashing = CachedEmbedder(HashingEmbedder(), tmp_path)
    bf16 = "@bfloat16" if minilm.inner.precision == "bfloat16" else ""
    assert minilm.model == f"sentence-transformers/all-MiniLM-L6-v2{bf16}" and hashing.model == "hashing-384"
    a, b = minilm.embed(["same text"]), hashing.embed(["same text"])
    assert not np.array_equal(a, b) and minilm.misses == hashing.misses == 1
    assert text_key("x\ud800") != text_key("x\ufffd"), "lone surrogates are not replaced before hashing"
    assert text_key("é") == text_key("é") != text_key("e\u0301")


def _fill(directory: str, start: int) -> None:
    CachedEmbedder(HashingEmbedder(), directory).embed([f"text {i}" for i in range(start, start + 400)])


def test_worker_processes_append_to_one_cache(tmp_path):
    """Two processes write overlapping texts at once (as --workers does); every vector lands once."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_fill, args=(str(tmp_path), start)) for start in (0, 200)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    reader = CachedEmbedder(HashingEmbedder(), tmp_path)
    assert len(reader) == 600
    texts = [f"text {i}" for i in range(600)]
    assert np.array_equal(reader.embed(texts), HashingEmbedder().embed(texts)) and reader.misses == 0


def test_default_location_follows_xdg_cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "flexamem" / "embeddings"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert str(default_cache_dir()).endswith(".cache/flexamem/embeddings")


def _measures(res: ItemResult) -> list[tuple]:
    """Everything a render record measured, without its timing."""
    return sorted((r.method, r.budget, r.item_id, r.step, r.tokens, r.evidence_full, r.evidence_part,
                   r.reused_hits, r.trace_hits, r.cached) for r in res.renders)


def test_a_warm_cache_gives_the_same_results_and_embeds_nothing(tmp_path, tokenizer, embedder):
    names = ("flexamem-piece", "flexamem-unit", "unit-retrieval", "amem", "pamer-plus")
    spec = Spec("trajectories", (1500, 3000), names)
    item = trajectory(16)
    runs = []
    for _ in range(2):
        cached = CachedEmbedder(embedder, tmp_path)
        env = Env(tokenizer=tokenizer, embedder_factory=lambda c=cached: c, config=FlexAMemConfig())
        runs.append((evaluate_item(item, spec, env), cached))
    (cold, c1), (warm, c2) = runs
    assert c1.misses > 0 and cold.embeddings_computed == c1.misses
    assert c2.misses == 0 and warm.embeddings_computed == 0 and warm.embeddings_cached > 0
    assert _measures(cold) == _measures(warm)
    plain = evaluate_item(item, spec, Env(tokenizer=tokenizer, embedder_factory=lambda: embedder))
    assert _measures(plain) == _measures(cold)


# ------------------------------------------------------------------ notes written once

def test_methods_of_one_history_share_one_store(tokenizer, embedder):
    env = Env(tokenizer=tokenizer, embedder_factory=lambda: embedder)
    item = conversation(tokenizer)
    shared: dict = {}
    first, second = make_method("flexamem-piece", env, shared), make_method("amem", env, shared)
    first.write(item.history)
    units = first.cost.units
    second.write(item.history)
    assert units > 0 and second.cost is first.cost and second.cost.units == units, "nothing written twice"
    assert second.memory("reader").store is first.memory("reader").store
    assert len(first.memory("reader").store.notes("item")) == units


@pytest.mark.parametrize("kind", ["conversation", "trajectory"])
def test_reuse_changes_no_result(kind, tokenizer, embedder):
    env = Env(tokenizer=tokenizer, embedder_factory=lambda: embedder)
    if kind == "conversation":
        item, spec = conversation(tokenizer), Spec("longmemeval", (600, 800), NOTE_METHODS)
    else:
        item, spec = trajectory(20), Spec("trajectories", (1500, 3000), NOTE_METHODS)
    shared, alone = evaluate_item(item, spec, env), evaluate_item(item, replace(spec, reuse=False), env)
    assert _measures(shared) == _measures(alone)
    units = {w.method: w.units for w in shared.writes}
    assert len(set(units.values())) == 1, "one write, reported by every method that shares it"


@needs_data
def test_reuse_changes_no_result_on_dev_slices(tokenizer, embedder):
    """A real trajectory's first 40 messages and a LoCoMo conversation's first 150 turns."""
    env, traj, conv = dev_slices(tokenizer, embedder)
    turns = conv.history[:150]
    ids = {m.metadata["turn"] for m in turns}
    questions = tuple(q for q in conv.questions if q.evidence and set(q.evidence) <= ids)[:6]
    cases = [(TrajectoryItem(traj.item_id, traj.messages[:40]), Spec("trajectories", (2000, 4000), NOTE_METHODS)),
             (ConversationItem(conv.history_id, turns, questions, conv.turn_text),
              Spec("locomo", (1000, 2000), NOTE_METHODS))]
    for item, spec in cases:
        assert _measures(evaluate_item(item, spec, env)) == \
            _measures(evaluate_item(item, replace(spec, reuse=False), env)), spec.dataset


# ------------------------------------------------------------------ ChatMemoryBuffer's fast path

class _WholeHistory(LlamaIndexBuffer):
    full = True


def _same_buffer(env: Env, item, budgets) -> int:
    checked = 0
    if isinstance(item, ConversationItem):
        fast, whole = LlamaIndexBuffer(env, {}), _WholeHistory(env, {})
        fast.write(item.history)
        whole.write(item.history)
        for q in item.questions[:2]:
            for b in budgets:
                assert fast.question_context(q, b) == whole.question_context(q, b), b
                checked += 1
    else:
        for b in budgets:
            fast, whole = LlamaIndexBuffer(env, {}), _WholeHistory(env, {})
            for i in range(3, len(item.messages) + 1, 2):
                assert fast.step_context(item.messages[:i], b) == whole.step_context(item.messages[:i], b), (b, i)
                checked += 1
    return checked


def test_buffer_fast_path_keeps_what_the_buffer_keeps(tokenizer):
    env = Env(tokenizer=tokenizer)
    assert _same_buffer(env, conversation(tokenizer), (60, 300, 600, 800, 5000)) == 5
    assert _same_buffer(env, trajectory(24), (400, 1500, 3000)) > 30
    lone = [Message(role="assistant", content="x " * 500), Message(role="user", content="y " * 500)]
    assert _same_buffer(env, TrajectoryItem("t", (Message(role="system", content="s"), *lone)), (100,)) == 1


@needs_data
def test_buffer_fast_path_on_dev_data(tokenizer):
    env = Env(tokenizer=tokenizer)
    assert _same_buffer(env, load("longmemeval", LME, limit=1)[0], (500, 4000, 8000)) == 3
    assert _same_buffer(env, load("locomo", LOCOMO, limit=8)[0], (500, 2000, 4000, 8000)) == 8
    assert _same_buffer(env, load("trajectories", TRAJ, limit=1)[0], (2000, 4000)) > 20


# ------------------------------------------------------------------ flexamem-auto

def test_flexamem_auto_is_first_and_runs_once_the_core_has_the_mode(tmp_path, tokenizer, embedder):
    from flexamem_eval.evaluate import evaluate_to_dir

    assert next(iter(METHODS)) == "flexamem-auto"
    data = tmp_path / "lme.json"
    from .test_datasets import LME as LME_RECORD

    data.write_text(json.dumps([LME_RECORD]))
    out = tmp_path / "out"
    evaluate_to_dir("longmemeval", data, budgets=[60], methods=["flexamem-auto", "truncation"], out=out,
                    progress=False, embedding_cache=tmp_path / "cache")
    rows = json.loads((out / "results.json").read_text())
    text = (out / "results.md").read_text()
    assert method_class("flexamem-auto").unavailable() is None
    assert {r["method"] for r in rows} == {"flexamem-auto", "truncation"}
    assert text.index("| flexamem-auto |") < text.index("| truncation |")


def test_cli_cache_options_and_run_record(tmp_path):
    from flexamem_tools.cli import main

    from .test_datasets import LME as LME_RECORD

    data = tmp_path / "lme.json"
    data.write_text(json.dumps([LME_RECORD]))
    cache = tmp_path / "emb"
    args = ["eval", "longmemeval", "--data", str(data), "--budgets", "60", "--methods", "flexamem-piece",
            "--quiet", "--threads", "1"]
    assert main([*args, "--out", str(tmp_path / "a"), "--embedding-cache", str(cache)]) == 0
    assert main([*args, "--out", str(tmp_path / "b"), "--embedding-cache", str(cache)]) == 0
    assert main([*args, "--out", str(tmp_path / "c"), "--no-embedding-cache"]) == 0
    a, b, c = (json.loads((tmp_path / d / "run.json").read_text()) for d in "abc")
    assert a["embeddings_computed"] > 0 and b["embeddings_computed"] == 0 and b["embeddings_cached"] > 0
    assert a["embedding_cache"] == str(cache) and c["embedding_cache"] is None
    assert (cache / "embeddings.sqlite3").exists() and len(a["load_before"]) == 3
    assert set(a["method_seconds"]) == {"flexamem-piece"}


def test_cli_set_passes_checked_settings_to_our_methods(tmp_path, capsys):
    from flexamem_tools.cli import main

    from .test_datasets import LME as LME_RECORD

    data = tmp_path / "lme.json"
    data.write_text(json.dumps([LME_RECORD]))
    args = ["eval", "longmemeval", "--data", str(data), "--budgets", "60", "--methods", "flexamem-piece",
            "--quiet", "--threads", "1"]
    assert main([*args, "--out", str(tmp_path / "on"), "--embedding-cache", str(tmp_path / "e1")]) == 0
    assert main([*args, "--out", str(tmp_path / "off"), "--embedding-cache", str(tmp_path / "e2"),
                 "--set", "piece_vectors=false", "--set", "fusion=bm25"]) == 0
    on, off = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("on", "off"))
    assert on["settings"] == {} and off["settings"] == {"piece_vectors": False, "tuning": {"fusion": "bm25"}}
    # a reader history embeds its pieces by default; with the setting off only notes and queries
    assert off["embeddings_computed"] < on["embeddings_computed"]
    capsys.readouterr()
    for bad in ("piece_vectors", "no_such_setting=1", "fusion=cosine"):
        assert main([*args, "--out", str(tmp_path / "bad"), "--no-embedding-cache", "--set", bad]) == 2
        assert "--set" in capsys.readouterr().err


# ------------------------------------------------------------------ the prompt-cache meter

def test_prefix_meter_agrees_with_the_core_meter(tokenizer, embedder):
    from flexamem_core.cache.prefix import CacheMeter
    from flexamem_eval.runner import PrefixMeter

    env = Env(tokenizer=tokenizer, embedder_factory=lambda: embedder)
    item = trajectory(24)
    calls = 0
    for name in ("flexamem-unit", "masking", "truncation", "langchain-trim", "full"):
        for budget in (1500, 3000):
            method, ours, core = make_method(name, env, {}), PrefixMeter(env), CacheMeter(tokenizer)
            for i in range(3, len(item.messages) + 1, 2):
                context = method.step_context(list(item.messages[:i]), budget)
                tokens = env.count(context)
                assert ours.add(context, tokens) == core.add(context, tokens)[1], (name, budget, i)
                calls += 1
    assert calls > 100
