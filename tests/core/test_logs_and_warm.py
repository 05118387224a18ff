"""Standard logging under ``flexamem``, warming the embedder, and the catch-up progress.

Real renders of the packaged 60-step demo run; log records are read with pytest's caplog.
"""

from __future__ import annotations

import logging

from flexamem_core import FlexAMem, FlexAMemConfig, Tuning
from flexamem_core.index import warm
from flexamem_core.index.embeddings import SentenceTransformerEmbedder
from flexamem_core.index.warm import CATCH_UP_BAR_UNITS
from flexamem_tools.demo_data import agent_history


def _records(caplog, level):
    return [r for r in caplog.records if r.name == "flexamem" and r.levelno == level]


def test_a_render_over_the_budget_logs_one_info_line_and_prints_nothing(caplog, capsys, tokenizer,
                                                                       hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=3000), tokenizer=tokenizer, embedder=hashing_embedder)
    history = agent_history()
    caplog.set_level(logging.DEBUG, logger="flexamem")
    r = mem.render(history, namespace="logged")
    info = _records(caplog, logging.INFO)
    assert len(info) == 1
    line = info[0].getMessage()
    assert f"{r.tokens} tokens (budget 3000)" in line
    assert f"memory {r.report['memory_tokens']} tokens" in line
    shown = {res: n for res, n in r.report["resolutions"].items() if n}
    assert shown and f"units {shown}" in line
    assert line.endswith(" ms") and "render logged: render" in line
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_a_history_that_fits_logs_only_at_debug(caplog, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=8000), tokenizer=tokenizer, embedder=hashing_embedder)
    caplog.set_level(logging.DEBUG, logger="flexamem")
    r = mem.render(agent_history()[:6], namespace="small")
    assert r.passthrough
    assert not _records(caplog, logging.INFO)
    assert any("passthrough" in rec.getMessage() for rec in _records(caplog, logging.DEBUG))


def test_every_call_of_a_cache_stable_thread_over_the_budget_logs_its_step(caplog, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=3000), tokenizer=tokenizer, embedder=hashing_embedder)
    history = agent_history()
    calls = [i for i, m in enumerate(history) if m.role == "assistant"]
    caplog.set_level(logging.INFO, logger="flexamem")
    over = 0
    for i in calls:
        over += not mem.render(history[:i], namespace="thread").passthrough
    lines = [r.getMessage() for r in _records(caplog, logging.INFO) if r.getMessage().startswith("render")]
    assert len(lines) == over > 0
    assert {line.split(": ")[1].split(",")[0] for line in lines} <= {"append", "extend", "compact", "render"}


def test_a_long_catch_up_is_announced_and_its_bar_stays_off_without_a_terminal(caplog, capsys, tokenizer,
                                                                               hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=3000, tuning=Tuning(agent_unit_tokens=50)), tokenizer=tokenizer,
                   embedder=hashing_embedder)
    caplog.set_level(logging.INFO, logger="flexamem")
    mem.render(agent_history(), namespace="resumed")
    announced = [r.getMessage() for r in _records(caplog, logging.INFO) if "not yet stored" in r.getMessage()]
    assert len(announced) == 1
    assert int(announced[0].split("writing notes for ")[1].split()[0]) >= CATCH_UP_BAR_UNITS
    assert "flexamem: notes" not in capsys.readouterr().err  # tqdm(disable=None): off on a non-terminal


def test_a_long_catch_up_logs_its_progress_with_an_estimate(caplog, monkeypatch, tokenizer, hashing_embedder):
    """Where no bar shows (no terminal), the host's log says how far a first call over a long
    history is and how long the rest will take (a line per PROGRESS_LOG_SECONDS; every unit here)."""
    monkeypatch.setattr(warm, "PROGRESS_LOG_SECONDS", 0.0)
    mem = FlexAMem(FlexAMemConfig(budget=3000, tuning=Tuning(agent_unit_tokens=50)), tokenizer=tokenizer,
                   embedder=hashing_embedder)
    caplog.set_level(logging.INFO, logger="flexamem")
    mem.render(agent_history(), namespace="resumed")
    lines = [r.getMessage() for r in _records(caplog, logging.INFO) if " units written, about " in r.getMessage()]
    total = len(mem.store.notes("resumed"))
    counts = [int(line.split(": ")[1].split(" of ")[0]) for line in lines]
    assert counts == list(range(1, len(counts) + 1)) and len(counts) >= total - 2  # every unit but the last
    assert all(f" of {total} units written, about " in line and line.endswith(" s left") for line in lines)


def test_warm_loads_the_model_in_the_background_and_logs_the_first_load(caplog, tokenizer):
    caplog.set_level(logging.INFO, logger="flexamem")
    embedder = SentenceTransformerEmbedder()  # a fresh instance: the session's shared one is loaded already
    mem = FlexAMem(FlexAMemConfig(warm="background"), tokenizer=tokenizer, embedder=embedder)
    assert mem.warming is not None
    mem.warming.join(timeout=300)
    assert not mem.warming.is_alive() and embedder._model is not None
    loads = [r.getMessage() for r in _records(caplog, logging.INFO) if "embedding model" in r.getMessage()]
    assert len(loads) == 2 and loads[0].startswith("loading") and " loaded in " in loads[1]
    mem.warm()  # already loaded: nothing is loaded or logged again
    assert len([r for r in _records(caplog, logging.INFO) if "embedding model" in r.getMessage()]) == 2
    vec = mem.embedder.embed(["the first render needs no load"])
    assert vec.shape == (1, 384)


def test_warm_is_lazy_by_default_and_works_with_a_model_free_embedder(tokenizer, hashing_embedder):
    mem = FlexAMem(tokenizer=tokenizer, embedder=hashing_embedder)
    assert mem.warming is None and mem.config.warm == "lazy"
    assert mem.warm() >= 0
