"""An agent call's query vector: the task and the head of the newest unit (its first
``QUERY_HEAD_CHARS`` characters: the step's command and the head of its output), the one
text of a step the embedder's cache cannot hold; a short newest unit is embedded whole."""

from __future__ import annotations

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.recall.queries import QUERY_HEAD_CHARS
from tests.core.checks import CountingEmbedder, steps

TASK = "Fix the failing test in notes.py"


def _history(n: int, size: int) -> list[dict]:
    return [{"role": "system", "content": "You are a shell agent."}, {"role": "user", "content": TASK},
            *steps(n, size=size)]


SHORT_STEP = [{"role": "assistant", "content": "```bash\nls\n```"},
              {"role": "user", "content": "<returncode>0</returncode>\nnotes.py"}]


def _render_texts(hashing_embedder, history: list[dict]) -> list[str]:
    """The texts a render of ``history`` embeds after its units were written."""
    emb = CountingEmbedder(hashing_embedder)
    mem = FlexAMem(FlexAMemConfig(budget=1500, cache_stable=False), embedder=emb)
    mem.ingest(history)
    emb.texts.clear()
    out = mem.render(history)
    assert out.report["memory_tokens"] > 0, "the memory is recalled with the query"
    return emb.texts


def test_the_query_embeds_the_task_and_the_head_of_a_long_newest_unit(hashing_embedder):
    texts = _render_texts(hashing_embedder, _history(30, size=200))
    assert TASK in texts
    heads = [t for t in texts if t != TASK]
    assert len(heads) == 1 and len(heads[0]) == QUERY_HEAD_CHARS
    step = heads[0].split("```bash\ncat notes_", 1)[1].split(".txt", 1)[0]
    assert int(step) >= 25, "a step of the newest unit opens it, with its command"
    assert f"note {step}: lorem ipsum" in heads[0], "then the head of its output"


def test_a_short_newest_unit_is_embedded_whole(hashing_embedder):
    texts = _render_texts(hashing_embedder, _history(30, size=200) + SHORT_STEP)  # each long step a unit
    heads = [t for t in texts if t != TASK]
    assert len(heads) == 1 and len(heads[0]) < QUERY_HEAD_CHARS
    assert "ls" in heads[0] and heads[0].rstrip().endswith("notes.py"), "the whole newest step"
