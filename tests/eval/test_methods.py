"""Methods on small hand-built histories: budgets kept, evidence found, masked outputs lost."""

from __future__ import annotations

import pytest

from flexamem_core import FlexAMemConfig, Message
from flexamem_eval.items import ConversationItem, Question, TrajectoryItem, turn_message
from flexamem_eval.methods import METHODS, make_method, method_class
from flexamem_eval.methods.base import Env
from flexamem_eval.methods.masking import mask_steps
from flexamem_eval.runner import Spec, evaluate_item

TOKEN_ONLY = ["truncation", "masking", "masking-log", "langchain-trim", "llamaindex-buffer"]


def trajectory(n_steps: int = 24, secret_step: int = 2) -> TrajectoryItem:
    msgs = [Message(role="system", content="You are a shell agent."),
            Message(role="user", content="Fix the failing import in the package.")]
    filler = "\n".join(f"log line {k}: processed record batch {k} without incident" for k in range(14))
    for i in range(n_steps):
        cmd = "cat secret_pkg/handler_v2.py" if i == n_steps - 1 else f"ls dir{i} && echo step {i}"
        msgs.append(Message(role="assistant", content=f"THOUGHT: step {i}\n\n```bash\n{cmd}\n```"))
        out = "found secret_pkg/handler_v2.py" if i == secret_step else filler
        msgs.append(Message(role="user", content=f"<returncode>0</returncode>\n<output>\n{out}\n</output>"))
    return TrajectoryItem("t1", tuple(msgs))


@pytest.fixture(scope="module")
def env(tokenizer, embedder):
    return Env(tokenizer=tokenizer, embedder_factory=lambda: embedder, config=FlexAMemConfig())


def test_string_only_in_a_masked_output_is_lost_by_masking(env):
    item = trajectory()
    spec = Spec("trajectories", (2000,), ("full", "masking", "truncation"))
    res = evaluate_item(item, spec, env)
    last = {r.method: r for r in res.renders if r.step == 23}
    assert last["full"].reused_total == 1 and last["full"].reused_hits == 1
    assert last["masking"].reused_hits == 0, "the only copy of the path was in a masked output"
    assert last["truncation"].reused_hits == 0
    # Masking keeps every command: the trace survives where truncation loses it.
    assert last["masking"].trace_hits > last["truncation"].trace_hits


def test_task_kept_records_whether_the_task_was_sent(env):
    """LangChain's ``trim_messages(include_system=True, start_on="human")`` keeps the system
    message and the newest messages, so past the budget it drops an agent's task (the first
    user message); the methods that keep the fixed prompt send it on every call."""
    spec = Spec("trajectories", (1500,), ("langchain-trim", "langchain-trim-task", "truncation", "masking",
                                          "flexamem-auto"))
    res = evaluate_item(trajectory(30), spec, env)
    kept: dict[str, list[bool | None]] = {}
    for r in res.renders:
        kept.setdefault(r.method, []).append(r.task_kept)
    assert set(kept) == set(spec.methods) and all(len(v) > 10 for v in kept.values())
    assert not any(kept["langchain-trim"])
    for name in ("langchain-trim-task", "truncation", "masking", "flexamem-auto"):
        assert all(kept[name]), name
    history = list(trajectory(30).messages)
    rules = " ".join(f"Rule {k}: run the tests in tests/unit_{k} before you submit." for k in range(25))
    history[1] = Message(role="user", content=f"Fix the failing import in the package. {rules}")
    trim = make_method("langchain-trim", env, {}).step_context(history, 1500)
    with_task = make_method("langchain-trim-task", env, {}).step_context(history, 1500)
    assert with_task[:2] == history[:2] and trim[0] is history[0] and env.count(with_task) <= env.effective(1500)
    steps = with_task[2:]
    assert 0 < len(steps) < len(trim) - 1 and steps == trim[len(trim) - len(steps):], \
        "the same newest steps, fewer: the task's room is taken from them"


def test_agent_only_methods_are_skipped_on_conversations():
    from flexamem_eval.evaluate import skipped_methods

    assert skipped_methods(["langchain-trim-task", "langchain-trim"], "longmemeval") == {
        "langchain-trim-task": "only for trajectories"}
    assert skipped_methods(["langchain-trim-task"], "trajectories") == {}


def test_mask_steps_keeps_the_newest_outputs():
    steps = [[Message(role="assistant", content=f"a{i}"), Message(role="user", content=f"out {i}")] for i in range(4)]
    flat = mask_steps(steps, keep=1)
    assert [m.text for m in flat[1::2]][:3] == ["[old output omitted: 1 lines]"] * 3
    assert flat[-1].text == "out 3" and [m.text for m in flat[0::2]] == ["a0", "a1", "a2", "a3"]


@pytest.mark.parametrize("name", TOKEN_ONLY)
def test_token_only_baselines_stay_within_budget(env, name):
    item = trajectory(30)
    method = make_method(name, env, {})
    for budget in (1500, 3000):
        for i in range(10, len(item.messages) + 1, 6):
            history = list(item.messages[:i])
            context = method.step_context(history, budget)
            n = env.count(context)
            if env.count(history) <= env.effective(budget):
                assert context == history
            else:
                # ChatMemoryBuffer counts message contents only (its own rule), not the
                # per-message overhead of the shared counter: allow exactly that overhead.
                slack = 4 * len(context) + 3 if name == "llamaindex-buffer" else 0
                assert n <= env.effective(budget) + slack, (name, budget, i, n)
                assert context[0].role == "system"


def conversation(tokenizer) -> ConversationItem:
    history = []
    for s in range(8):
        date = f"2023/05/{s + 1:02d}"
        for t in range(6):
            text = (f"Session {s} turn {t}: we talked about the weather, groceries and weekend plans "
                    f"in some detail, nothing memorable happened on day {s}.")
            if (s, t) == (1, 2):
                text = "By the way, my sister Priya moved to Tromso to study glaciology."
            history.append(turn_message(text, "user" if t % 2 == 0 else "assistant", f"{s}:{t}", f"s{s}", date))
    q = Question("q1", "Where did my sister Priya move to study glaciology?", "single-session-user", ("1:2",))
    texts = {m.metadata["turn"]: m.text for m in history}
    return ConversationItem("c1", tuple(history), (q,), texts)


def test_reader_methods_on_a_known_answer(env, tokenizer):
    item = conversation(tokenizer)
    names = ["full", "truncation", "piece-retrieval", "flexamem-piece", "flexamem-unit", "amem"]
    res = evaluate_item(item, Spec("longmemeval", (800,), tuple(names)), env)
    by = {r.method: r for r in res.renders}
    assert env.count(list(item.history)) > 800 * 1.5, "history must exceed the budget well"
    assert by["full"].evidence_full == 1
    assert by["truncation"].evidence_part == 0, "the evidence is old; the newest units do not hold it"
    for name in ("piece-retrieval", "flexamem-piece", "flexamem-unit", "amem"):
        assert by[name].evidence_full == 1, name
    for name in names[1:]:
        assert by[name].tokens <= env.effective(800), (name, by[name].tokens)
    writes = {w.method: w for w in res.writes}
    assert writes["flexamem-unit"].units > 0 and writes["flexamem-unit"].llm_calls == 0


def test_every_method_renders_a_trajectory_within_budget(env):
    item = trajectory(12)
    names = [n for n in METHODS if n != "full" and method_class(n).unavailable() is None]
    res = evaluate_item(item, Spec("trajectories", (1500,), tuple(names)), env)
    assert {r.method for r in res.renders} == set(names)
    for r in res.renders:
        slack = 4 * 40 if r.method == "llamaindex-buffer" else 0
        assert r.tokens <= env.effective(1500) + slack, (r.method, r.step, r.tokens)


def test_newest_output_larger_than_the_budget_is_cut_to_fit(env):
    item = trajectory(6)
    huge = "\n".join(f"row {k}: value {k * 13} in column alpha_{k}" for k in range(600))
    msgs = [*item.messages[:-1], Message(role="user", content=f"<output>\n{huge}\n</output>")]
    for name in [*TOKEN_ONLY, "piece-retrieval"]:
        if name in ("llamaindex-buffer", "langchain-trim"):
            continue  # the peers keep their own rule (whole messages)
        context = make_method(name, env, {}).step_context(msgs, 2000)
        assert env.count(context) <= env.effective(2000), name
        assert context[0].role == "system"
