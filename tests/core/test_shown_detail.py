"""Issue 9's defects found as a new user would, and the verbatim, compact contract.

Each test drives the real memory (MiniLM where recovery depends on it) on a history that
showed the defect, and checks what the model would have been sent.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.model.schema import Piece
from flexamem_core.recall.joins import PIECES_HEADER, omission_join

SECRET = "zebra-42"


def query_db_history(steps: int = 30, rows: int = 8) -> list[dict]:
    """``steps`` query_db calls with similar outputs; step 3's output holds ALPHA_TOKEN, then
    the user asks for it."""
    msgs = [{"role": "system", "content": "You are a data agent."},
            {"role": "user", "content": "Summarise the sales tables."}]
    for i in range(1, steps + 1):
        lines = [f"row {k}: region_{(i * 7 + k) % 13} sales={(i * 31 + k * 17) % 997}" for k in range(rows)]
        if i == 3:
            lines.insert(rows // 2, f"ALPHA_TOKEN={SECRET}")
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "query_db", "arguments": json.dumps({"sql": f"SELECT * FROM sales_{i}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "name": "query_db", "content": "\n".join(lines)})
    msgs.append({"role": "user", "content": "What was the ALPHA_TOKEN value you saw earlier?"})
    return msgs


def before_last(r) -> str:
    """Everything sent except the newest message (which repeats the question, not the answer)."""
    return "\n".join(m.text for m in r.messages[:-1])


@pytest.mark.parametrize("query", [None, "ALPHA_TOKEN"])
def test_unit_mode_shows_the_exact_detail_the_user_asks_for(embedder, tokenizer, query) -> None:
    mem = FlexAMem(FlexAMemConfig(budget=3000, mode="unit"), embedder=embedder, tokenizer=tokenizer)
    r = mem.render(query_db_history(), query=query)
    assert not r.passthrough and r.report["old_units"] >= 2
    assert SECRET in before_last(r)
    shown = [u for u in r.report["units"] if u["resolution"] in ("raw", "excerpt")]
    assert any(u.get("why") == "focus match" for u in shown)


@pytest.mark.parametrize("query", [None, "ALPHA_TOKEN"])
def test_the_default_mode_shows_the_exact_detail_the_user_asks_for(embedder, tokenizer, query) -> None:
    """The automatic mode (the default) plans the unit that best matches the human turn and
    shows it whole, first."""
    mem = FlexAMem(FlexAMemConfig(budget=3000), embedder=embedder, tokenizer=tokenizer)
    r = mem.render(query_db_history(), query=query)
    assert not r.passthrough and r.report["old_units"] >= 2
    assert SECRET in before_last(r)
    planned = r.report["auto"]["planned"]
    assert planned and planned[0]["why"] == "focus match" and planned[0]["planned"] == "raw"
    assert f"ALPHA_TOKEN={SECRET}" in r.memory_text


def test_render_question_on_an_agent_memory_pins_no_old_turn(hashing_embedder, tokenizer) -> None:
    mem = FlexAMem(FlexAMemConfig(budget=3000, cache_stable=False), embedder=hashing_embedder, tokenizer=tokenizer)
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task: fix the build"}]
    for i in range(30):
        history.append({"role": "assistant", "content": f"step {i}\n```bash\nls dir{i}\n```"})
        history.append({"role": "user", "content": f"observation {i}: " + "out " * 150})
    mem.ingest(history)
    r = mem.render_question("what did I ask?", budget=3000)
    assert [m.text for m in r.messages][-1] == "what did I ask?"
    assert len(r.messages) == 2 and r.messages[0].text.startswith("<memory>")
    assert not any(m.text.startswith("observation") for m in r.messages)


def long_answer_chat() -> list[dict]:
    """Sessions of small talk; in one, the assistant's long answer about the inverter warranty."""
    msgs = []
    for s in range(6):
        date = f"2024-0{s + 1}-10"
        for t in range(4):
            msgs.append({"role": "user", "content": f"Session {s} question {t} about gardening and tomatoes.",
                         "metadata": {"session": s, "date": date}})
            if s == 3 and t == 1:
                lines = [f"Point {k}: the solar inverter warranty covers part {k} for {k + 5} years, "
                         f"claims go through installer desk {k * 7}." for k in range(30)]
                msgs.append({"role": "assistant", "content": "\n".join(lines),
                             "metadata": {"session": s, "date": date}})
            else:
                msgs.append({"role": "assistant", "content": f"Answer {t}: water them in the morning.",
                             "metadata": {"session": s, "date": date}})
    return msgs


def test_a_recovered_long_turn_is_verbatim_text_labelled_once(embedder, tokenizer) -> None:
    mem = FlexAMem(FlexAMemConfig(budget=3000, history="reader", mode="piece"), embedder=embedder,
                   tokenizer=tokenizer)
    history = long_answer_chat()
    mem.ingest(history, final=True)
    r = mem.render_question("What does the solar inverter warranty cover, and which installer desk?", budget=3000)
    text = r.memory_text or ""
    assert PIECES_HEADER in text
    lines = text.split(PIECES_HEADER, 1)[1].split("\n")
    answer = next(m["content"] for m in history if "inverter" in m["content"])
    shown = [ln for ln in lines if "inverter warranty" in ln]
    assert len(shown) >= 8  # several consecutive pieces of the long turn
    for before, line in zip(lines, lines[1:]):
        if line.startswith("[assistant] "):  # a label only where a run starts
            assert before == "..." or before.startswith("== ["), (before, line)
    for line in shown:
        assert line.removeprefix("[assistant] ") in answer


def _pieces(texts: list[str], starts: list[bool]) -> list[Piece]:
    return [Piece(unit_key="u", index=i, text=t, tokens=len(t.split()), block=0, starts_block=s, label="assistant")
            for i, (t, s) in enumerate(zip(texts, starts))]


def test_a_continuing_piece_is_not_labelled_again() -> None:
    from flexamem_core.recall.joins import piece_spans

    raw = "assistant:\nfirst line of a long answer\nsecond line\nthird line"
    plist = _pieces(["assistant:\nfirst line of a long answer", "second line", "third line"], [True, False, False])
    joined = omission_join(plist[1:], len(plist), raw, piece_spans(plist, raw))
    assert joined == "...\n[assistant] second line\nthird line"
    assert joined.count("[assistant]") == 1


@st.composite
def unit_text(draw: st.DrawFn) -> tuple[str, list[Piece], list[int]]:
    """A unit's raw text of blocks (joined by a blank line) cut into pieces by the real cutter,
    and a sorted choice of piece indexes."""
    from flexamem_core.request.tokens import default_tokenizer
    from flexamem_core.write.pieces import cut_pieces
    from flexamem_core.write.units import Block

    word = st.text(alphabet="abcdefgh XYZ-_=:0123456789", min_size=0, max_size=40)
    blocks = draw(st.lists(st.lists(word, min_size=1, max_size=8), min_size=1, max_size=4))
    objs = [Block(header=f"[step {i}] tool result", body="\n".join(lines), label=f"step {i}: cat f{i}")
            for i, lines in enumerate(blocks)]
    raw = "\n\n".join(b.text for b in objs)
    plist = cut_pieces("u", objs, default_tokenizer(), draw(st.sampled_from([4, 8, 30])))
    chosen = draw(st.lists(st.sampled_from(range(len(plist))), unique=True)) if plist else []
    return raw, plist, sorted(chosen)


@settings(max_examples=60, deadline=None)
@given(unit_text())
def test_every_recovered_run_is_contiguous_original_text(case) -> None:
    from flexamem_core.recall.joins import piece_spans

    raw, plist, chosen = case
    kept = [plist[i] for i in chosen]
    joined = omission_join(kept, len(plist), raw, piece_spans(plist, raw))
    for part in joined.split("\n...\n") if joined else []:
        part = part.removeprefix("...\n").removesuffix("\n...")
        if part in ("", "..."):
            continue
        body = re.sub(r"^\[step \d+: cat f\d+\] ", "", part)
        assert body in raw
    # '...' only where text is left out: never between two neighbouring pieces.
    assert joined.count("...") == sum(1 for a, b in zip([-1, *chosen], chosen) if b != a + 1) + \
        (1 if chosen and chosen[-1] != len(plist) - 1 else 0)


def big_newest_history(steps: int = 60, big_lines: int = 100) -> list[dict]:
    """Small read steps, then a newest step whose output alone takes about half the budget."""
    msgs = [{"role": "system", "content": "You are an investigator."},
            {"role": "user", "content": "Investigate the service config and logs."}]
    for i in range(steps + 1):
        lines = big_lines if i == steps else 12
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": "read", "arguments": json.dumps({"path": f"src/mod_{i}.py"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "\n".join(
            f"src/mod_{i}.py:{k:02d}: setting_{k} = {(k * 7919 + i * 31) % 100003}" for k in range(lines))})
    return msgs


@pytest.mark.parametrize("mode", ["unit", "piece"])
def test_a_big_newest_unit_leaves_the_memory_half_its_room(hashing_embedder, tokenizer, mode) -> None:
    """Followed call by call (cache-stable), the memory keeps at least half the allowance the
    whole budget gives it; rendered afresh, nothing is hidden that merging can fit."""
    history = big_newest_history()
    fresh = FlexAMem(FlexAMemConfig(budget=4000, cache_stable=False, mode=mode), embedder=hashing_embedder,
                     tokenizer=tokenizer).render(history)
    rep = fresh.report
    assert rep["window_tokens"] > 4000 / 4 and rep["old_units"] > 10  # the newest unit is over its share
    assert rep["resolutions"]["hidden"] == 0
    assert rep["memory_tokens"] >= rep["allowance"] / 2
    assert rep["unused_allowance"] == rep["allowance"] - rep["memory_tokens"]
    mem = FlexAMem(FlexAMemConfig(budget=4000, mode=mode), embedder=hashing_embedder, tokenizer=tokenizer)
    for n in range(len(history) - 20, len(history) + 1, 2):
        r = mem.render(history[:n])
    assert r.report["cache"]["step"] in ("render", "extend", "compact")
    assert r.report["memory_tokens"] >= rep["allowance"] / 2, r.report
