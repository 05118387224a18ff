"""One test per finding of issue 11 (findings 6 and 9, the stores, are tested with the stores).

Each builds the minimal case the finding reported and checks the invariant it broke,
against an independent count of what is sent (``checks.independent_tokens``).
"""

from __future__ import annotations

import random

import pytest

from flexamem_core import BudgetError, Message, MessageError, ToolCall
from flexamem_core.request.counting import count_messages
from flexamem_core.request.cuts import TRUNCATION_MARK
from flexamem_core.write.pieces import cut_block

from .checks import independent_tokens, steps, structure_problem, unsendable

MARK = "omitted by FlexA-Mem to fit the budget"


def assert_sent_as_counted(r, budget: int) -> None:
    assert unsendable(r.messages) == [], "a control character or lone surrogate is sent"
    assert independent_tokens(r.messages) <= r.tokens <= int(budget * 0.95)
    assert structure_problem(r.messages) is None, structure_problem(r.messages)


# 1 ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cache_stable", [True, False])
def test_finding_1_control_characters_in_the_window_are_sent_as_counted(mem, cache_stable):
    nuls = "\x00" * 6000 + "\x1b[31mred\x1b[0m \ud800 end"
    history = [{"role": "user", "content": "TASK: read the log"}, *steps(10),
               {"role": "assistant", "content": "```bash\ncat log.bin\n```", "id": "last"},
               {"role": "user", "content": nuls, "id": "obs"}]
    for budget in (3000, 1200):
        r = mem(budget=budget, cache_stable=cache_stable).render(history)
        assert_sent_as_counted(r, budget)
        assert r.messages[-1].content == "[31mred[0m ? end"
    small = [{"role": "user", "content": "TASK \x07"}, {"role": "assistant", "content": "ok\x00"}]
    r = mem(budget=3000).render(small)
    assert r.passthrough and [m.content for m in r.messages] == ["TASK ", "ok"]
    assert_sent_as_counted(r, 3000)


# 2 ------------------------------------------------------------------------------------------

def _whitespace_texts(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        alphabet = rng.choice([" ", " \t", " \n", "\n", " \u3000", " \xa0\n"])
        run = "".join(rng.choice(alphabet) for _ in range(rng.randint(512, 3000)))
        out.append(rng.choice(["x", ".", " a", "1"]) + run + rng.choice(["y", ".", "1", "", "  z"]))
    return out


def test_finding_2_whitespace_runs_are_counted_exactly(tokenizer):
    for text in _whitespace_texts(150):
        assert tokenizer.count(text) == len(tokenizer.encoding.encode_ordinary(text))


def test_finding_2_a_history_over_the_budget_is_never_passed_through(mem, tokenizer):
    text = "".join(_whitespace_texts(40, seed=2))
    history = [{"role": "user", "content": "TASK: format"},
               {"role": "assistant", "content": "```bash\ncat a\n```"}, {"role": "user", "content": text}]
    sent = independent_tokens([Message.from_dict(m) for m in history])
    budget = int((sent - 10) / 0.95)  # the real request is just over B_bar
    r = mem(budget=budget).render(history)
    assert not r.passthrough
    assert independent_tokens(r.messages) <= r.tokens <= int(budget * 0.95)


# 3 ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [8000, 16000])
def test_finding_3_a_huge_pinned_user_turn_is_cut_not_an_error(mem, budget):
    huge = "Please also check these logs:\n" + "\n".join(f"log line {i}: status ok value {i * 3}"
                                                         for i in range(6000))
    history = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "TASK: fix"},
               {"role": "user", "content": huge, "id": "human"},
               *[m for i in range(40) for m in (
                   {"role": "assistant", "content": "", "id": f"c{i}",
                    "tool_calls": [{"id": f"t{i}", "name": "run", "arguments": "{}"}]},
                   {"role": "tool", "content": f"output {i} " * 60, "tool_call_id": f"t{i}"})]]
    r = mem(budget=budget).render(history)
    assert_sent_as_counted(r, budget)
    pinned = [m for m in r.messages if m.text.startswith("Please also check these logs:")]
    assert len(pinned) == 1 and MARK in pinned[0].text and r.report["pinned_turn_cut_messages"] == 1
    assert r.messages[-1].tool_call_id == "t39" and r.messages[-1].text == "output 39 " * 60


# 4 ------------------------------------------------------------------------------------------

def test_finding_4_results_stay_with_their_own_calls_in_a_render(mem):
    calls = [ToolCall("read_file", '{"path": "a.py"}', "c1").to_dict(),
             {"name": "read_file", "arguments": '{"path": "b.py"}'}]
    newest = [{"role": "assistant", "content": "", "tool_calls": calls, "id": "two"},
              {"role": "tool", "content": "contents of b.py", "id": "rb"},
              {"role": "user", "content": "(typed while the tools ran)", "id": "between"},
              {"role": "tool", "content": "contents of a.py", "tool_call_id": "c1", "id": "ra"}]
    history = [{"role": "user", "content": "TASK: read"}, *steps(10), *newest]
    for budget in (1200, 100_000):  # rendered, and passed through
        r = mem(budget=budget).render(history)
        assert_sent_as_counted(r, budget)
        call = next(m for m in r.messages if m.id == "two")
        b_id = call.tool_calls[1].id
        by_call = {m.tool_call_id: m.text for m in r.messages if m.role == "tool"}
        assert by_call["c1"] == "contents of a.py" and by_call[b_id] == "contents of b.py"
        assert not any(m.metadata.get("flexamem") in ("orphan-result", "placeholder") for m in r.messages)
        assert r.messages[-1].text == "(typed while the tools ran)"
        assert r.report["newest_step"] == "repaired" and r.report["pairing_repairs"] >= 2


# 5 ------------------------------------------------------------------------------------------

def test_finding_5_reader_mode_applies_the_message_rules_to_the_current_turn(mem):
    chat = [m for i in range(30) for m in (
        {"role": "user", "content": f"question {i} " + "words " * 80},
        {"role": "assistant", "content": f"answer {i} " + "more words " * 80})]
    current = [{"role": "user", "content": "What did I ask first?"},
               {"role": "system", "content": "Answer briefly."},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "s1", "name": "search", "arguments": "{}"}]}]
    history = [{"role": "system", "content": "You remember chats."}, *chat, *current]
    for mode in ("unit", "piece"):
        r = mem(budget=2000, history="reader", mode=mode).render(history)
        assert_sent_as_counted(r, 2000)
        assert [m.role for m in r.messages].count("system") == 1
        assert any(m.text == "[system] Answer briefly." for m in r.messages)


# 7 ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lead", ["", "\n" * 300], ids=["plain", "blank-lines-first"])
def test_finding_7_the_newest_output_is_cut_to_the_room_it_has(mem, tokenizer, lead):
    body = lead + "\n".join(f"row {i}: value {i * 7} status ok" for i in range(6000))
    history = [{"role": "user", "content": "TASK: sum"},
               {"role": "assistant", "content": "", "id": "c", "tool_calls": [{"id": "t", "name": "cat",
                                                                                 "arguments": "{}"}]},
               {"role": "tool", "content": body, "tool_call_id": "t", "id": "out"}]
    full = count_messages([Message.from_dict(m) for m in history], tokenizer)
    for budget in (int((full - 104) / 0.95), 24_000, 4000):
        r = mem(budget=budget).render(history)
        assert_sent_as_counted(r, budget)
        b_bar = int(budget * 0.95)
        assert r.tokens >= b_bar - 8, f"cut to {r.tokens} of {b_bar}: the room was not used"
        out = r.messages[-1].text
        head, tail = out.split(TRUNCATION_MARK.split("{n}")[0])
        assert abs(tokenizer.count(head) - tokenizer.count(tail.split("...]\n", 1)[1])) <= 3, "cut in the middle"
        assert body.startswith(head) and body.endswith(tail.split("...]\n", 1)[1])


# 8 ------------------------------------------------------------------------------------------

def test_finding_8_pieces_are_slices_of_the_raw_text(tokenizer):
    line = "key: " + " " * 700 + "value\t" + "\t" * 900 + "end " + "x " * 400
    block = f"header\n{line}\nlast line"
    parts = cut_block(block, tokenizer, 150)
    pos = 0
    for text, n in parts:
        at = block.find(text, pos)
        assert at >= 0, f"piece is not a slice of the text: {text[:40]!r}"
        assert n == tokenizer.count(text) <= 150
        pos = at + len(text)
    assert "".join(p for p, _ in parts).replace("\n", "") == block.replace("\n", "")


# 10 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("call", "error"), [
    (lambda m: m.render([{"role": "user", "content": "hi", "metadata": "not a dict"}]), MessageError),
    (lambda m: m.render([{"role": "user", "content": "hi", "metadata": 5}]), MessageError),
    (lambda m: m.render([Message(role="user", content="hi", metadata=["x"])]), MessageError),
    (lambda m: m.render(None), MessageError),
    (lambda m: m.render(42), MessageError),
    (lambda m: m.render({"role": "user"}), MessageError),
    (lambda m: m.render([{"role": "user", "content": "hi"}], extra_tokens="5"), BudgetError),
    (lambda m: m.render([{"role": "user", "content": "hi"}], extra_tokens=-1), BudgetError),
    (lambda m: m.render([{"role": "user", "content": "hi"}], extra_tokens=1.5), BudgetError),
    (lambda m: m.render([{"role": "user", "content": "hi"}], query=7), MessageError),
    (lambda m: m.render([{"role": "tool", "content": "x", "tool_call_id": ["a"]}]), MessageError),
    (lambda m: m.render([{"role": "assistant", "tool_calls": "run"}]), MessageError),
    (lambda m: m.render_question(None), MessageError),
    (lambda m: m.ingest(None), MessageError),
])
def test_finding_10_bad_arguments_get_the_documented_exception_types(mem, call, error):
    with pytest.raises(error) as info:
        call(mem(budget=1000))
    assert type(info.value) is error


# 11 -----------------------------------------------------------------------------------------

def test_finding_11_a_malformed_history_below_the_budget_is_repaired_not_passed_unpaired(mem):
    history = [{"role": "system", "content": "sys"}, {"role": "user", "content": "TASK"},
               {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": "{}"}]},
               {"role": "system", "content": "inner"},
               {"role": "tool", "content": "stray", "tool_call_id": "ghost"},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "open", "name": "g", "arguments": "{}"}]}]
    r = mem(budget=5000).render(history)
    assert r.passthrough and r.report["pairing_repairs"] >= 4
    assert_sent_as_counted(r, 5000)
    assert r.tokens == count_messages(r.messages, mem().tokenizer)
    only_system = [{"role": "system", "content": "rule " * 400}]
    with pytest.raises(BudgetError, match="too small for the fixed prompt"):
        mem(budget=300).render(only_system)
