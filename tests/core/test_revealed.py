"""What old steps revealed stays in the memory: the identifiers an agent's outputs printed,
on the record line of the step that printed them, ranked by what the agent names."""

from __future__ import annotations

import re

import pytest

from flexamem_core import FlexAMem, Message
from flexamem_core.model.schema import Note
from flexamem_core.recall.revealed import REVEALED_EARLIER, REVEALED_MARK, RevealedLedger, conveys
from flexamem_core.write.identifiers import identifiers_in, unit_identifiers
from tests.conftest import flat_config

FOUND = "src/billing/ledger_sync.py:412"
SYMBOL = "reconcile_batch_v2"


def agent_history(steps: int = 40, named_at: int | None = None) -> list[dict]:
    """A mini-swe-agent run: step 3's ``grep`` prints FOUND and SYMBOL among other hits;
    every other step prints filler. ``named_at``: that step's thought names SYMBOL."""
    msgs = [{"role": "system", "content": "You are a coding agent. Reply with one bash block."},
            {"role": "user", "content": "Fix the rounding error in the billing export."}]
    for i in range(1, steps + 1):
        thought = f"THOUGHT: step {i}, I keep looking." + (f" The culprit is {SYMBOL}." if i == named_at else "")
        msgs.append({"role": "assistant", "content": f"{thought}\n\n```bash\nls -la dir_{i}\n```"})
        if i == 3:
            out = "\n".join(["searching the tree for matches", *(f"src/other/file_{k}.py:{k}: pass" for k in range(6)),
                             f"{FOUND}:    def {SYMBOL}(rows):", "src/billing/export_csv.py:88: rounding_mode = 2"])
        else:
            out = "\n".join(f"entry {k} of listing {i}: plain words only here" for k in range(12))
        msgs.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{out}\n</output>"})
    return msgs


def lines_with(text: str, needle: str) -> list[str]:
    return [ln for ln in text.splitlines() if needle in ln]


def test_unit_identifiers_count_outputs_and_the_agents_own_mentions() -> None:
    msgs = [Message("assistant", "Let me open src/app/main_view.py now"),
            Message("user", "src/app/main_view.py:10 MainView\nsrc/app/main_view.py:12 helper_fn"),
            Message("user", "helper_fn again; version 3.11.7; plain words")]
    ids = {t: (o, n) for t, o, n in unit_identifiers(msgs)}
    assert ids["src/app/main_view.py:10"] == (1, 0)
    assert ids["src/app/main_view.py"] == (0, 1)  # named by the agent only
    assert ids["helper_fn"] == (2, 0) and ids["MainView"] == (1, 0)
    assert "plain" not in ids and "words" not in ids and "3.11.7" not in ids  # a name starts with a letter
    capped = unit_identifiers(msgs, limit=1)
    assert [t for t, _, _ in capped] == ["helper_fn"]  # the one in most messages


def test_identifiers_strip_trailing_punctuation_and_need_a_mark() -> None:
    assert identifiers_in("see foo_bar. then path/to/x.py: and Simple word Error") == ["foo_bar", "path/to/x.py"]
    assert identifiers_in("Camel and camelCase and QuerySet") == ["camelCase", "QuerySet"]
    # a harness's markup is not an identifier; what it wraps is
    assert identifiers_in("<output_head>\nsrc/a_b.py\n</output_head>\n<elided_chars>\n12</elided_chars>") == \
        ["src/a_b.py"]
    assert identifiers_in("\x1b[01mRunning Sphinx v5.2.0\x1b[39;49;00m") == ["v5.2.0"]  # no "mRunning"
    assert identifiers_in("sss...........s test_parameters ok") == ["test_parameters"]  # a runner's progress


def test_note_round_trip_keeps_identifiers_and_reads_older_notes(tokenizer, hashing_embedder) -> None:
    mem = FlexAMem(flat_config(agent_unit_tokens=100), tokenizer=tokenizer, embedder=hashing_embedder)
    mem.ingest(agent_history(8), namespace="t")
    note = mem.store.notes("t")[0]
    assert note.identifiers and all(isinstance(t, str) for t, _, _ in note.identifiers)
    assert Note.from_dict(note.to_dict()) == note
    old = note.to_dict()
    del old["identifiers"]  # a note written before the field existed
    assert Note.from_dict(old).identifiers == ()


@pytest.mark.parametrize("stable", [True, False])
def test_an_old_steps_identifiers_stay_on_its_line(tokenizer, hashing_embedder, stable) -> None:
    history = agent_history(40, named_at=38)
    mem = FlexAMem(flat_config(agent_unit_tokens=100, budget=3000, mode="timeline-only", cache_stable=stable),
                   tokenizer=tokenizer, embedder=hashing_embedder)
    without = FlexAMem(flat_config(agent_unit_tokens=100, budget=3000, mode="timeline-only", cache_stable=stable,
                                   revealed_share=0), tokenizer=tokenizer, embedder=hashing_embedder)
    for n in range(10, len(history) + 1, 2):
        r, r0 = mem.render(history[:n]), without.render(history[:n])
        assert r.report["total_tokens"] <= 3000 * 0.95
    assert r.report["old_units"] > 10 and r.memory_text
    # step 3's unit is far out of the window; its output's path and symbol are on its line
    (line,) = lines_with(r.memory_text, FOUND)
    assert SYMBOL in "\n".join(m.text for m in r.messages)  # the window names it, or the memory lists it
    m = re.match(r"- \[steps? (\d+)(?:-(\d+))?\]", line)
    if m:
        assert int(m.group(1)) <= 3 <= int(m.group(2) or m.group(1)) and REVEALED_MARK in line
    else:
        assert line.startswith(REVEALED_EARLIER) and "step" in line
    assert FOUND not in r0.memory_text  # without the share, the record kept only the command


@pytest.mark.parametrize("mode", ["auto", "unit", "piece"])
def test_every_mode_keeps_what_old_steps_revealed_within_budget(tokenizer, hashing_embedder, mode) -> None:
    history = agent_history(40, named_at=38)
    mem = FlexAMem(flat_config(agent_unit_tokens=100, budget=3000, mode=mode), tokenizer=tokenizer,
                   embedder=hashing_embedder)
    for n in range(10, len(history) + 1, 2):
        r = mem.render(history[:n])
        assert r.report["total_tokens"] <= 3000 * 0.95
    assert FOUND in r.memory_text and SYMBOL in "\n".join(m.text for m in r.messages)


def test_the_task_and_the_window_are_not_listed_again(tokenizer, hashing_embedder) -> None:
    history = agent_history(30)
    history[1]["content"] += " The file src/billing/export_csv.py:88 is involved."
    mem = FlexAMem(flat_config(agent_unit_tokens=100, budget=3000, mode="timeline-only", cache_stable=False),
                   tokenizer=tokenizer, embedder=hashing_embedder)
    r = mem.render(history)
    shown = "".join(ln.split(REVEALED_MARK, 1)[1] for ln in r.memory_text.splitlines() if REVEALED_MARK in ln)
    assert FOUND in shown and "src/billing/export_csv.py:88" not in shown
    window = "\n".join(m.text for m in r.messages[-4:])
    assert not any(s in shown.split(", ") for s in identifiers_in(window))


def test_what_the_agent_names_ranks_first(tokenizer) -> None:
    def note(pos: int, ids: tuple) -> Note:
        import numpy as np
        return Note(unit_key=f"u{pos}", record="r", record_tokens=1, keywords=(), tags=(), description="",
                    embedding=np.zeros(4, dtype=np.float32), links=(), raw_tokens=1, identifiers=ids)

    notes = [note(0, (("alpha_one", 1, 0), ("beta_two", 3, 0))), note(1, (("gamma_three", 1, 0),)),
             note(2, (("alpha_one", 0, 1),))]
    ledger = RevealedLedger()
    assert ledger.grow(notes)
    # room for one identifier: named by the agent beats printed more often beats newer
    assert ledger.choose(2, 7, "", "", tokenizer).by_unit == {0: ["beta_two"]}  # unit 2 is not old: not counted
    assert ledger.choose(3, 7, "", "", tokenizer).by_unit == {0: ["alpha_one"]}
    assert ledger.choose(2, 7, "now gamma_three", "", tokenizer).by_unit == {0: ["beta_two"]}  # shown in the window
    assert ledger.choose(2, 7, "", "beta_two", tokenizer).by_unit == {1: ["gamma_three"]}  # in the task
    assert ledger.choose(2, 100, "", "", tokenizer).by_unit == {0: ["alpha_one", "beta_two"], 1: ["gamma_three"]}
    assert not ledger.grow([note(0, ()), note(9, ())])  # another chain: not taken in


def test_conveys_a_whole_name_not_the_head_of_another() -> None:
    assert conveys("see testbed/django/db/query.py:12 now", "django/db/query.py")
    assert conveys("see testbed/django/db/query.py:12 now", "testbed/django/db/query.py:12")
    assert conveys("import django.db.models.query", "django.db.models")
    assert conveys("(helper_fn)", "helper_fn")
    assert not conveys("run test_10 and test_11", "test_1")
    assert not conveys("class models.ModelForm", "models.Model")
    assert not conveys("my_helper_fn()", "helper_fn")
    assert not conveys("", "helper_fn")


def _ledger(*units: tuple[tuple[str, int, int], ...]) -> RevealedLedger:
    import numpy as np
    ledger = RevealedLedger()
    ledger.grow([Note(unit_key=f"u{pos}", record="r", record_tokens=1, keywords=(), tags=(), description="",
                      embedding=np.zeros(4, dtype=np.float32), links=(), raw_tokens=1, identifiers=ids)
                 for pos, ids in enumerate(units)])
    return ledger


def test_no_room_goes_to_what_the_records_or_a_longer_identifier_show(tokenizer) -> None:
    path, line = "src/billing/ledger_sync.py", "src/billing/ledger_sync.py:412"
    ledger = _ledger(((path, 5, 0), (line, 1, 0), ("reconcile_batch", 2, 0), ("reconcile_batch_v2", 1, 0)), ())
    both = ledger.choose(1, 200, "", "", tokenizer).by_unit[0]
    assert line in both and path not in both  # the path and its line, once
    assert "reconcile_batch" in both and "reconcile_batch_v2" in both  # one does not name the other
    record = "- [step 1] ran `grep -rn x src/billing/ledger_sync.py:412`"
    beside = ledger.choose(1, 200, "", "", tokenizer, shown=record)
    assert beside.by_unit[0] == ["reconcile_batch", "reconcile_batch_v2"]  # the record shows the path already
    tight = ledger.choose(1, tokenizer.count(path) + 5, "", "", tokenizer)
    assert tight.by_unit[0] == [path]  # no room for the longer one: the one printed most stays


def test_a_second_process_sends_the_same_requests(tokenizer, hashing_embedder, tmp_path) -> None:
    """The ranking is derived from the stored notes: a process that reopens the store
    renders what the first one did."""
    from flexamem_core.stores.sqlite import SQLiteStore

    history = agent_history(36, named_at=30)
    cfg = flat_config(agent_unit_tokens=100, budget=3000, mode="timeline-only", cache_stable=False)
    first = FlexAMem(cfg, store=SQLiteStore(str(tmp_path / "m.db")), tokenizer=tokenizer, embedder=hashing_embedder)
    r1 = first.render(history)
    second = FlexAMem(cfg, store=SQLiteStore(str(tmp_path / "m.db")), tokenizer=tokenizer, embedder=hashing_embedder)
    r2 = second.render(history)
    assert REVEALED_MARK in r1.memory_text
    assert [m.to_dict() for m in r1.messages] == [m.to_dict() for m in r2.messages]


@pytest.mark.parametrize("stable", [True, False])
def test_identifiers_take_at_most_revealed_tokens_whatever_the_budget(tokenizer, hashing_embedder, stable) -> None:
    """However large the share of the memory, one render or extension adds
    at most ``revealed_tokens`` of identifiers."""
    history = agent_history(40)
    for i, m in enumerate(history[3::2]):  # every output prints identifiers of its own
        m["content"] += "\n" + "\n".join(f"pkg_{i}/mod_{k}.py:{k}" for k in range(8))

    def shown(cap: int) -> list[str]:
        mem = FlexAMem(flat_config(agent_unit_tokens=100, budget=3000, mode="timeline-only", cache_stable=stable,
                                   revealed_tokens=cap, revealed_share=0.9), tokenizer=tokenizer,
                       embedder=hashing_embedder)
        suffixes: list[str] = []
        for n in range(10, len(history) + 1, 2):
            r = mem.render(history[:n])
            assert r.report["total_tokens"] <= 3000 * 0.95
            text = r.memory_text or ""
            now = [ln.split(REVEALED_MARK, 1)[1] for ln in text.splitlines() if REVEALED_MARK in ln]
            now += [ln[len(REVEALED_EARLIER):] for ln in text.splitlines() if ln.startswith(REVEALED_EARLIER)]
            if not stable:  # per call: this render's choice alone
                assert sum(tokenizer.count(s) for s in now) <= cap
            suffixes = now
        return suffixes

    few, many = shown(60), shown(4000)
    assert few and sum(tokenizer.count(s) for s in few) < sum(tokenizer.count(s) for s in many)
