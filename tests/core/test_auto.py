"""``mode="auto"``: per call, a fixed rule splits the memory between the trace, whole units and
pieces, and says why. Real MiniLM, real tokenizer, no mock of our code."""

from __future__ import annotations

import re

import pytest

from flexamem_core import FlexAMem
from flexamem_core.recall.strategies.auto import RULE
from tests.conftest import flat_config

CITIES = ["Lisbon", "Kyoto", "Reykjavik", "Marrakesh", "Valparaiso", "Tbilisi", "Hanoi", "Oaxaca", "Bergen",
          "Cusco", "Zanzibar", "Ljubljana"]
CHATTER = [
    "we talked about the garden, watering the tomatoes early and moving the compost bin behind the shed",
    "my sister called about her new job at the library and the long commute by train",
    "I repainted the bathroom a pale green and the ceiling still needs a second coat",
    "the car needs new brake pads before the winter and the garage is booked for Friday",
    "I finished the novel about the lighthouse keeper and started a thriller set on a ship",
    "the neighbours' cat keeps sleeping on our porch swing in the afternoons",
]
SOURDOUGH = [
    "My sourdough starter died over the holidays: it smelled of acetone and had a grey layer of hooch.",
    "To revive the sourdough starter, discard all but a spoonful and feed it twice a day.",
    "I fed my sourdough starter whole rye flour and lukewarm water, one to one by weight.",
    "After four days of rye flour feedings the sourdough starter doubled in six hours again.",
    "Now the sourdough starter lives in the fridge and gets rye flour once a week.",
    "Great, a revived sourdough starter with rye flour usually makes a tangier loaf.",
]


def conversation(sessions: int = 12) -> list[dict]:
    """Dated sessions of small talk. Session 5 is all about reviving a sourdough starter (the
    evidence of one question lies in one unit); each session also names one city someone
    wants to visit (the evidence of another is scattered over every unit)."""
    msgs = []
    for s in range(sessions):
        meta = {"session": str(s), "date": f"2024-{s % 12 + 1:02d}-{s + 3:02d}"}
        for t in range(6):
            if s == 5:
                text = SOURDOUGH[t]
            elif t == 3:
                text = f"Some day I would love to visit {CITIES[s]}; it is on my travel wish list."
            else:
                text = f"Session {s}: {CHATTER[(s + t) % len(CHATTER)]}."
            msgs.append({"role": "user" if t % 2 == 0 else "assistant", "content": text, "metadata": meta})
    return msgs


def reader(embedder, tokenizer, **settings) -> FlexAMem:
    cfg = flat_config(**{"budget": 3000, "history": "reader", "mode": "auto", "reader_unit_tokens": 400,
                         **settings})
    mem = FlexAMem(cfg, tokenizer=tokenizer, embedder=embedder)
    mem.ingest(conversation(), final=True)
    return mem


@pytest.fixture(scope="module")
def chat_mem(embedder, tokenizer):
    return reader(embedder, tokenizer)


CONCENTRATED = "How did I revive my sourdough starter, and which flour did I feed it?"
SCATTERED = "Which cities did I say I would love to visit some day?"


def test_a_concentrated_question_gets_its_unit_whole(chat_mem):
    r = chat_mem.render_question(CONCENTRATED)
    auto = r.report["auto"]
    assert auto["recovery"] == "unit and pieces"
    assert auto["signals"]["concentration"] >= RULE.whole_concentration
    assert auto["whole"]["shown"] is True and auto["whole"]["tokens"] <= auto["whole"]["limit"]
    unit = chat_mem.store.get_unit("default", auto["whole"]["unit"])
    assert all(t in unit.raw for t in SOURDOUGH), "the whole unit is the sourdough session"
    assert unit.raw in r.memory_text, "shown whole, verbatim, as one contiguous run"
    # the rest of the room still goes to the best pieces of other units
    assert any(p["unit"] != unit.key for p in r.report["pieces"])


def test_a_scattered_question_gets_the_best_pieces(chat_mem):
    r = chat_mem.render_question(SCATTERED)
    auto = r.report["auto"]
    assert auto["recovery"] == "pieces" and not auto["whole"]
    assert auto["signals"]["concentration"] < RULE.whole_concentration
    assert auto["signals"]["units_in_top"] >= 5
    shown = [c for c in CITIES if f"I would love to visit {c}" in r.memory_text]
    assert len(shown) >= 10, shown  # pieces from many units, not one unit whole


def test_auto_shows_at_least_what_piece_mode_shows(chat_mem, embedder, tokenizer):
    """The question rule spends the room piece recovery spends, and lends it more when sure."""
    piece = reader(embedder, tokenizer, mode="piece")
    for q in (CONCENTRATED, SCATTERED):
        a, p = chat_mem.render_question(q), piece.render_question(q)
        evidence = SOURDOUGH if q == CONCENTRATED else [f"I would love to visit {c}" for c in CITIES]
        assert sum(e in a.memory_text for e in evidence) >= sum(e in p.memory_text for e in evidence)
        assert a.report["spent"]["timeline"] <= p.report["spent"]["timeline"]


def test_the_report_says_what_was_chosen_and_why(chat_mem):
    for q in (CONCENTRATED, SCATTERED):
        auto = chat_mem.render_question(q).report["auto"]
        assert set(auto) >= {"recovery", "why", "signals", "thresholds", "timeline_share", "confident"}
        sig, th = auto["signals"], auto["thresholds"]
        assert sig["words_from"] == "question" and sig["words"] > 0
        assert 0 < sig["concentration"] <= 1 and sig["units_in_top"] >= 1
        assert th["whole_concentration"] == RULE.whole_concentration
        assert th["confident_concentration"] == RULE.confident_concentration
        # the reason names the signal values and the thresholds it compared them with
        assert f"{sig['concentration']:.2f}" in auto["why"] and str(RULE.confident_concentration) in auto["why"]
        assert auto["timeline_share"] in (RULE.confident_share, 0.25)


def test_a_question_render_is_deterministic_and_within_budget(chat_mem, embedder, tokenizer):
    other = reader(embedder, tokenizer)
    for q in (CONCENTRATED, SCATTERED):
        for budget in (700, 1500, 3000, 6000):
            a = chat_mem.render_question(q, budget=budget)
            b = other.render_question(q, budget=budget)
            assert a.messages == b.messages and a.report == b.report
            assert a.tokens <= int(budget * 0.95)
            assert a.report["memory_tokens"] <= a.report["allowance"]


# -- agents -------------------------------------------------------------------------------

MODULES = ["billing", "auth", "search", "export", "cache", "mailer", "reports", "upload", "queue", "metrics",
           "geo", "audit", "pricing", "invoices", "users", "sessions", "webhooks", "scheduler", "tags", "themes",
           "alerts", "backup", "cdn", "dns", "email", "feeds", "gateway", "health", "images", "jobs"]


def handlers(mod: str, n: int = 12) -> list[str]:
    return [f"{mod}/handler_{k}.py: def handle_{mod}_{k}(request): return render(request, '{mod}_{k}.html')"
            for k in range(n)]


def agent_history(newest: str = "echo done", newest_output: str = "done", user_turn: str | None = None,
                  token_step: int | None = None, long: str | None = None) -> list[dict]:
    """30 one-step units of a coding agent, each with its own command and output (``long``:
    that module's output is 50 lines, several pieces)."""
    msgs = [{"role": "system", "content": "You are a careful coding agent."},
            {"role": "user", "content": "TASK: tidy the handlers of every module."}]
    for i, mod in enumerate(MODULES):
        lines = handlers(mod, 50 if mod == long else 12)
        if i == token_step:
            lines.insert(6, "ALPHA_TOKEN=zebra-42")
        msgs += [{"role": "assistant", "content": f"THOUGHT: look at {mod}\n```bash\ngrep -rn def {mod}/\n```",
                  "id": f"a{i}"},
                 {"role": "user", "content": "<returncode>0</returncode>\n<output>\n" + "\n".join(lines)
                                             + "\n</output>", "id": f"o{i}"}]
    if user_turn is not None:
        msgs.append({"role": "user", "content": user_turn, "id": "human"})
    else:
        msgs += [{"role": "assistant", "content": f"THOUGHT: wrap up\n```bash\n{newest}\n```", "id": "last"},
                 {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{newest_output}\n</output>",
                  "id": "last_out"}]
    return msgs


def agent(embedder, tokenizer, **settings) -> FlexAMem:
    cfg = flat_config(**{"budget": 6000, "mode": "auto", "agent_unit_tokens": 200, "cache_stable": False,
                         **settings})
    return FlexAMem(cfg, tokenizer=tokenizer, embedder=embedder)


def commands_in(text: str) -> set[str]:
    return set(re.findall(r"grep -rn def (\w+)/", text))


def test_an_agent_step_with_no_strong_match_keeps_the_trace(embedder, tokenizer):
    history = agent_history("date", "Tue Dec  1 12:00:00 UTC 2026")
    r = agent(embedder, tokenizer).render(history)
    unit = agent(embedder, tokenizer, mode="unit").render(history)
    trace = agent(embedder, tokenizer, mode="timeline-only").render(history)
    auto = r.report["auto"]
    assert auto["signals"]["concentration"] < RULE.step_concentration
    assert auto["planned"] == [] and auto["recovery"] == "trace and pieces"
    assert str(RULE.step_concentration) in auto["why"]
    # the trace of the timeline-only render is all there; unit recovery merged part of it away
    assert "(merged)" not in r.memory_text
    assert commands_in(r.memory_text) >= commands_in(trace.memory_text)
    assert "(merged)" in unit.memory_text
    assert len(commands_in(unit.memory_text)) < len(commands_in(r.memory_text))


def test_an_agent_step_matching_one_old_unit_gets_it_back(embedder, tokenizer):
    """The newest step works on the same files as one old step: their pieces concentrate there."""
    out = "\n".join(handlers("geo", 50)[::-1])
    mem = agent(embedder, tokenizer)
    r = mem.render(agent_history("grep -rn def geo/ | sort -r", out, long="geo"))

    def mem_raw(r, key):
        return mem.store.get_unit("default", key).raw

    auto = r.report["auto"]
    pos = MODULES.index("geo")
    assert auto["signals"]["best_unit"] == pos
    assert auto["signals"]["concentration"] >= RULE.step_concentration
    planned = next(p for p in auto["planned"] if p["position"] == pos)
    assert planned["why"] == "concentrated match" and planned["planned"] == "raw"
    assert planned["tokens"] <= RULE.detail_share * r.report["reference_allowance"]
    unit = next(u for u in r.report["units"] if u["position"] == pos)
    assert unit["pieces"] > 0
    assert r.report["pieces"][0]["unit"] == unit["unit"], "shown first"
    raw = mem_raw(r, unit["unit"])
    assert raw in r.memory_text, "whole and verbatim"


@pytest.mark.parametrize("budget", [3000, 6000])
def test_an_exact_detail_a_user_asks_for_is_shown(budget, embedder, tokenizer):
    history = agent_history(user_turn="What was the ALPHA_TOKEN printed earlier?", token_step=3)
    r = agent(embedder, tokenizer, budget=budget).render(history)
    auto = r.report["auto"]
    assert auto["signals"]["words_from"] == "focus"
    assert auto["planned"][0]["why"] == "focus match" and auto["planned"][0]["position"] == 3
    assert "ALPHA_TOKEN=zebra-42" in r.memory_text
    assert r.tokens <= int(budget * 0.95)


def test_agent_calls_in_the_cache_stable_request_report_and_fit(embedder, tokenizer):
    """Call by call, as an agent loop renders: every call fits, and renders and extends say why."""
    history = agent_history()
    mem = agent(embedder, tokenizer, budget=3000, cache_stable=True)
    twin = agent(embedder, tokenizer, budget=3000, cache_stable=True)
    steps = set()
    for cut in range(4, len(history) + 1, 2):
        r, t = mem.render(history[:cut]), twin.render(history[:cut])
        assert r.messages == t.messages and r.report == t.report, "deterministic"
        assert r.tokens <= int(3000 * 0.95)
        if r.passthrough:
            continue
        step = r.report["cache"]["step"]
        steps.add(step)
        assert "why" in r.report["auto"], step
        if step == "render":  # (an extended memory may grow past the allowance of the render it grew from)
            assert r.report["memory_tokens"] <= r.report["allowance"]
    assert {"render", "append"} <= steps
