"""The LLM-free measures on small hand-built examples whose right answer is known."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flexamem_core import Message
from flexamem_eval.actions import action_text, trajectory_targets
from flexamem_eval.metrics import (
    EvidenceTurn,
    detail_strings,
    evidence_shown,
    normalize,
    percentile,
    score_step,
    step_targets,
    turn_pieces,
)


def test_normalize_collapses_whitespace():
    assert normalize("  a\n\n b\t c  ") == "a b c"


def test_whole_turn_matches_despite_rewrapping(tokenizer):
    turn = EvidenceTurn.build("t1", "I adopted a dog\nnamed Biscuit in May.", tokenizer)
    shown = evidence_shown("memory: I adopted   a dog named\tBiscuit in May. end", [turn])
    assert shown.full == (True,) and shown.part == (True,) and shown.all_shown


def test_evidence_turn_split_into_pieces_counts_in_part_only(tokenizer):
    lines = [f"line {i}: the blue heron nested near pier {i} with {i * 7} eggs" for i in range(40)]
    text = "\n".join(lines)
    turn = EvidenceTurn.build("t1", text, tokenizer)
    assert len(turn.pieces) >= 3, "a 40-line turn must be cut into several 150-token pieces"
    assert all(tokenizer.count(p) <= 150 for p in turn_pieces(text, tokenizer))
    second = turn.pieces[1]
    shown = evidence_shown(f"header\n{second}\nfooter", [turn])
    assert shown.full == (False,)
    assert shown.part == (True,)
    missing = evidence_shown("nothing relevant here", [turn])
    assert missing.part == (False,) and not missing.all_shown


def test_header_is_not_part_of_a_piece(tokenizer):
    """Pieces are cut as the core cuts the turn's block, but match without its header."""
    turn = EvidenceTurn.build("t1", "We moved to Lisbon on 3 March.", tokenizer, header="[2023/05/01] user:")
    assert turn.pieces == ("We moved to Lisbon on 3 March.",)


def test_questions_all_evidence_needs_every_turn(tokenizer):
    a = EvidenceTurn.build("a", "Alice bought a red bike.", tokenizer)
    b = EvidenceTurn.build("b", "Bob sold his old car.", tokenizer)
    shown = evidence_shown("Alice bought a red bike.", [a, b])
    assert shown.full == (True, False) and not shown.all_shown


def test_detail_strings_rules():
    action = ("cat django/db/backends/postgresql/client.py && grep -n runshell tests/ "
              "&& python -c 'import foo; fooBar()' && echo hello world && ls build2 && "
              "sed -n 1,20p setup.cfg...")
    found = detail_strings(action)
    assert "django/db/backends/postgresql/client.py" in found  # path
    assert "setup.cfg" in found  # trailing dots stripped
    assert "tests/" in found  # slash
    assert "build2" in found  # digit
    assert "fooBar" in found  # camelCase hump
    assert "runshell" not in found and "python" not in found and "hello" not in found  # plain words
    assert "foo" not in found  # shorter than 6 characters


def _traj(observations: list[str], commands: list[str], task: str = "Fix the bug in the parser.") -> list[Message]:
    msgs = [Message(role="system", content="You are an agent."), Message(role="user", content=task)]
    for i, cmd in enumerate(commands):
        msgs.append(Message(role="assistant", content=f"THOUGHT: step {i}\n\n```bash\n{cmd}\n```"))
        if i < len(observations):
            msgs.append(Message(role="user", content=observations[i]))
    return msgs


def test_reused_details_come_from_observations_only():
    msgs = _traj(
        observations=["<returncode>0</returncode>\n<output>\nsrc/pkg/parser_core.py\nsrc/pkg/util.py\n</output>",
                      "<returncode>0</returncode>\n<output>\ndef parse_header(x):\n</output>"],
        commands=["find . -name '*.py'", "cat src/pkg/parser_core.py", "grep -n parse_header src/pkg/parser_core.py"],
        task="The parser breaks. Look at setup_tools.py first.",
    )
    targets = trajectory_targets(msgs)
    assert [t.step for t in targets] == [0, 1, 2]
    assert targets[0].reused == ()
    assert targets[1].reused == ("src/pkg/parser_core.py",)
    # parse_header is new and was printed; the path was already used by an earlier action.
    assert targets[2].reused == ("parse_header",)
    assert targets[2].earlier_commands == ("find . -name '*.py'", "cat src/pkg/parser_core.py")


def test_string_in_task_is_not_a_reused_detail():
    targets = step_targets("edit config_loader.py please", [(2, "ls"), (4, "cat config_loader.py")],
                           ["", "config_loader.py"])
    assert targets[1].reused == ()


def test_score_step_counts_hits():
    targets = step_targets("task", [(2, "ls -la"), (4, "cat pkg/mod_a.py\nmore")], ["", "pkg/mod_a.py here"])
    t = targets[1]
    assert t.reused == ("pkg/mod_a.py",)
    res = score_step("context with ls   -la and pkg/mod_a.py", t)
    assert (res.reused_hits, res.reused_total, res.trace_hits, res.trace_total) == (1, 1, 1, 1)
    res = score_step("nothing", t)
    assert (res.reused_hits, res.trace_hits) == (0, 0)
    assert not res.task_kept and score_step("the task, then ls -la", t).task_kept


def _trajectory(*turns: tuple[str, str]) -> list[Message]:
    return [Message(role="system", content="agent"), Message(role="user", content="fix the bug"),
            *(Message(role=r, content=c) for r, c in turns)]


def test_a_reused_detail_is_far_when_none_of_the_newest_observations_holds_it():
    msgs = _trajectory(("assistant", "```bash\nls\n```"), ("user", "pkg/old_mod.py pkg/new_mod.py"),
                       ("assistant", "```bash\necho a\n```"), ("user", "a"),
                       ("assistant", "```bash\necho b\n```"), ("user", "b pkg/new_mod.py"),
                       ("assistant", "```bash\ncat pkg/old_mod.py pkg/new_mod.py\n```"))
    last = trajectory_targets(msgs)[-1]
    assert last.reused == ("pkg/old_mod.py", "pkg/new_mod.py")
    assert last.far == ("pkg/old_mod.py",), "new_mod.py is in the newest observation, old_mod.py three back"
    assert trajectory_targets(msgs, near=3)[-1].far == (), "three observations back is near with near=3"
    assert trajectory_targets(msgs, near=0)[-1].far == last.reused, "near=0: every reused detail is far"
    res = score_step("shown: pkg/new_mod.py", last)
    assert (res.reused_hits, res.reused_total, res.far_hits, res.far_total) == (1, 2, 0, 1)
    res = score_step("shown: pkg/old_mod.py", last)
    assert (res.reused_hits, res.far_hits) == (1, 1)


def test_action_text_reads_bash_block_and_tool_calls():
    m = Message(role="assistant", content="THOUGHT: x\n\n```bash\nls -la /tmp\n```")
    assert action_text(m) == "ls -la /tmp"
    call = Message.from_dict({"role": "assistant", "content": "",
                              "tool_calls": [{"name": "read", "arguments": '{"path": "a/b_c.py"}'}]})
    assert "a/b_c.py" in action_text(call)


def test_percentile():
    assert percentile([], 50) is None
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5.0], 95) == 5.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300), min_size=1, max_size=12))
def test_pieces_are_verbatim_and_bounded(tokenizer, lines):
    text = "\n".join(lines)
    pieces = turn_pieces(text, tokenizer)
    for p in pieces:
        assert tokenizer.count(p) <= 150
        assert normalize(p) in normalize(text)
    turn = EvidenceTurn.build("t", text, tokenizer)
    if turn.text:
        shown = evidence_shown(text, [turn])
        assert shown.full == (True,) and shown.part == (True,)
