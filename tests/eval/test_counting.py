"""The evaluation's counts of every context several methods render on dev data are the
whole texts' o200k counts, exactly, although long texts are counted from their lines'
memoised counts (:func:`flexamem_core.request.tokens.line_parts`)."""

from __future__ import annotations

from flexamem_core.request.counting import count_messages
from flexamem_core.request.tokens import TiktokenTokenizer
from flexamem_eval.methods import make_method, method_class

from .test_dev_data import dev_slices, needs_data


def _methods() -> list[str]:
    names = ["flexamem-auto", "flexamem-piece", "piece-retrieval", "unit-retrieval", "amem-fit-or-degrade",
             "masking-log", "pamer-plus"]
    return [n for n in names if method_class(n).unavailable() is None]


@needs_data
def test_env_count_is_exact_on_dev_renders(tokenizer, embedder):
    """Every context several methods render on a dev trajectory and LoCoMo questions."""
    env, traj, conv = dev_slices(tokenizer, embedder)
    whole = TiktokenTokenizer(tokenizer.encoding)
    whole.line_additive = False  # every text encoded at once
    history = conv.history[:200]
    checked = 0
    for name in _methods():
        shared: dict = {}
        method = make_method(name, env, shared)
        for i in range(10, min(len(traj.messages), 56), 3):
            context = method.step_context(list(traj.messages[:i]), 3000)
            assert env.count(context) == count_messages(context, whole), (name, i)
            checked += 1
        reader = make_method(name, env, {})
        reader.write(history)
        for q in conv.questions[:2]:
            for budget in (2000, 8000):
                context = reader.question_context(q, budget)
                assert env.count(context) == count_messages(context, whole), (name, q.item_id, budget)
                checked += 1
    assert checked > 100
