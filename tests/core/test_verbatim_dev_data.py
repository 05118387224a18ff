"""On real dev data, every run of recovered pieces is contiguous original text of its unit.

Reads LongMemEval_S and LoCoMo dev from ``../shared/data`` (skipped when absent). The
memory text is parsed on its own (group headers, ``...`` marks, run labels), and each run
must be a substring of the raw text of a unit its group shows (units of one date share one
header); a label may open a run only, and ``...`` never stands between two runs of one
group without text left out.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.recall.joins import PIECES_HEADER
from flexamem_eval.datasets import load

DATA = Path(os.environ.get("FLEXAMEM_DEV_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
SETS = {"longmemeval": DATA / "longmemeval" / "longmemeval_s_dev60.jsonl.gz",
        "locomo": DATA / "locomo" / "locomo10_dev.json"}


def groups(memory: str) -> list[list[str]]:
    """The runs of each unit group after the pieces header, labels kept."""
    tail = memory.split(PIECES_HEADER, 1)[1].removesuffix("</memory>")
    out: list[list[str]] = []
    run: list[str] = []

    def close() -> None:
        if run and out:
            out[-1].append("\n".join(run))
        run.clear()

    for line in tail.strip("\n").split("\n"):
        if re.fullmatch(r"== \[.*\] ==", line):
            close()
            out.append([])
        elif line == "...":
            close()
        else:
            run.append(line)
    close()
    return out


@pytest.mark.parametrize("dataset", sorted(SETS))
def test_recovered_runs_are_substrings_of_their_units(dataset, hashing_embedder, tokenizer) -> None:
    if not SETS[dataset].exists():
        pytest.skip(f"dev data not found at {SETS[dataset]}")
    items = load(dataset, SETS[dataset], limit=2 if dataset == "longmemeval" else 4)[:2]
    checked = 0
    for item in items:
        mem = FlexAMem(FlexAMemConfig(history="reader", mode="piece"), embedder=hashing_embedder,
                       tokenizer=tokenizer)
        mem.ingest(list(item.history), namespace="dev", final=True)
        for question in [q for q in item.questions if not q.abstention][:3]:
            for budget in (2000, 4000, 8000):
                r = mem.render_question(question.text, namespace="dev", budget=budget)
                if not r.memory_text or PIECES_HEADER not in r.memory_text:
                    continue
                # one group per run of shown units with the same label (a date, said once)
                shown: list[tuple[str, list[dict]]] = []
                for u in (u for u in r.report["units"] if u.get("pieces")):
                    if shown and shown[-1][0] == u["label"]:
                        shown[-1][1].append(u)
                    else:
                        shown.append((u["label"], [u]))
                found = groups(r.memory_text)
                assert len(found) == len(shown)
                assert re.findall(r"^== \[(.*)\] ==$", r.memory_text, re.M) == [label for label, _ in shown]
                for (_, units), runs in zip(shown, found):
                    # the group's text as the conversation had it: neighbouring units meet at a
                    # turn boundary (a blank line); a run never spans a unit that is left out
                    source = ""
                    for k, u in enumerate(units):
                        if k:
                            source += "\n\n" if u["position"] == units[k - 1]["position"] + 1 else "\x00"
                        source += mem.store.get_unit("dev", u["unit"]).raw
                    for text in runs:
                        body = re.sub(r"^\[[^\]\n]*\] ", "", text) if text not in source else text
                        assert body in source and "\x00" not in body, (budget, text[:200])
                        checked += 1
    assert checked > 20
