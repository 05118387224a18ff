"""Counting a long text from its lines' counts gives the whole text's o200k count, exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flexamem_core.render import count_messages
from flexamem_eval.counting import _CUT, MIN_CHARS, LineCounter, line_additive
from flexamem_eval.methods import make_method, method_class

from .test_dev_data import dev_slices, needs_data

#: Characters and runs around the cut points: newlines, returns, slashes (which the punctuation
#: chunk may take after a newline), other whitespace, punctuation, non-ASCII letters, emoji.
PARTS = st.sampled_from([*"ab Z9.,/-=[]()\n\r\t\u00a0\u2028\u3000é漢😀'\"#*_:;<>|~!", "'s", "'LL", "\n\n", "  ",
                         " /", "/\n", "\n/", ".\n", "x\n", "\n ", "\r\n", "123456", "<memory>", "== [s1] =="])


@settings(max_examples=1500, deadline=None)
@given(st.lists(PARTS, max_size=400))
def test_parts_cut_after_newlines_add_up(tokenizer, parts):
    text = "".join(parts)
    assert sum(tokenizer.count_uncached(p) for p in _CUT.split(text)) == tokenizer.count_uncached(text)


def test_line_counter_counts_as_the_tokenizer(tokenizer):
    assert line_additive(tokenizer)
    counter = LineCounter(tokenizer)
    text = "\n".join(f"- [step {i}] ran `pytest -x tests/test_{i}.py`: 3 failed, /tmp/x{i}" for i in range(400))
    assert len(text) > MIN_CHARS and counter.count(text) == tokenizer.count_uncached(text)
    assert counter.count("short") == tokenizer.count("short")


def _methods() -> list[str]:
    names = ["flexamem-auto", "flexamem-piece", "piece-retrieval", "unit-retrieval", "amem-fit-or-degrade",
             "masking-log", "pamer-plus"]
    return [n for n in names if method_class(n).unavailable() is None]


@needs_data
def test_env_count_is_exact_on_dev_renders(tokenizer, embedder):
    """Every context several methods render on a dev trajectory and LoCoMo questions."""
    env, traj, conv = dev_slices(tokenizer, embedder)
    history = conv.history[:200]
    checked = 0
    for name in _methods():
        shared: dict = {}
        method = make_method(name, env, shared)
        for i in range(10, min(len(traj.messages), 56), 3):
            context = method.step_context(list(traj.messages[:i]), 3000)
            assert env.count(context) == count_messages(context, tokenizer), (name, i)
            checked += 1
        reader = make_method(name, env, {})
        reader.write(history)
        for q in conv.questions[:2]:
            for budget in (2000, 8000):
                context = reader.question_context(q, budget)
                assert env.count(context) == count_messages(context, tokenizer), (name, q.item_id, budget)
                checked += 1
    assert checked > 100
