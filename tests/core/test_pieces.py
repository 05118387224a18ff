"""Pieces: verbatim slices cut at line breaks, at most kappa tokens, never across blocks."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import Message
from flexamem_core.request.layout import split_layout
from flexamem_core.write.pieces import cut_block, cut_pieces
from flexamem_core.write.units import Block, pack_units

from .strategies import agent_history, conversation, text

PROPS = settings(deadline=None, max_examples=80, suppress_health_check=list(HealthCheck))


def assert_covers(block_text: str, parts: list[str]) -> None:
    """The parts appear in order and verbatim; only whitespace is left between them."""
    pos = 0
    for p in parts:
        start = block_text.find(p, pos)
        assert start >= 0, f"piece not found verbatim in order: {p[:60]!r}"
        assert not block_text[pos:start].strip(), f"text lost before {p[:60]!r}"
        pos = start + len(p)
    assert not block_text[pos:].strip(), "text lost at the end of the block"


lines = st.lists(text(0, 80), min_size=1, max_size=40).map("\n".join)


@PROPS
@given(body=lines, kappa=st.integers(8, 200))
def test_parts_fit_kappa_and_cover_the_block(body, kappa, tokenizer):
    parts = cut_block(body, tokenizer, kappa)
    for p, n in parts:
        assert n == tokenizer.count(p) <= kappa
        assert p.strip()
    assert_covers(body, [p for p, _ in parts])


@PROPS
@given(body=st.lists(st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=60)
                     .filter(lambda s: s.strip()), min_size=1, max_size=30).map("\n".join),
       kappa=st.integers(30, 200))
def test_short_lines_rejoin_exactly_with_newlines(body, kappa, tokenizer):
    # Every line non-blank and short enough: the pieces joined by newlines are the block.
    if any(tokenizer.count(ln) > kappa for ln in body.split("\n")):
        return
    parts = [p for p, _ in cut_block(body, tokenizer, kappa)]
    assert "\n".join(parts) == body
    assert all(tokenizer.count(p) <= kappa for p in parts)


def test_a_line_longer_than_kappa_is_cut_by_tokens(tokenizer):
    line = " ".join(f"token{i}" for i in range(600))
    block = f"short first line\n{line}\nshort last line"
    parts = [p for p, _ in cut_block(block, tokenizer, 150)]
    assert all(tokenizer.count(p) <= 150 for p in parts)
    inner = [p for p in parts if "token" in p]
    assert len(inner) >= tokenizer.count(line) // 150
    assert "".join(inner) == line, "the long line is cut into consecutive slices"
    assert parts[0] == "short first line" and parts[-1] == "short last line"


def test_blank_lines_make_no_empty_pieces(tokenizer):
    parts = cut_block("a\n\n\n   \nb", tokenizer, 2)
    assert [p.strip() for p, _ in parts] == ["a", "b"]
    assert all(n <= 2 for _, n in parts)


@PROPS
@given(history=agent_history(min_steps=1, max_steps=12), kappa=st.integers(10, 150))
def test_agent_pieces_never_cross_blocks(history, kappa, tokenizer):
    body = list(split_layout([Message.from_dict(m) for m in history], "agent").body)
    for unit in pack_units(body, "agent", tokenizer, 400, final=True):
        pieces = cut_pieces("u", unit.blocks, tokenizer, kappa)
        assert [p.index for p in pieces] == list(range(len(pieces)))
        for b_idx, block in enumerate(unit.blocks):
            own = [p for p in pieces if p.block == b_idx]
            assert all(p.tokens <= kappa and p.tokens == tokenizer.count(p.text) for p in own)
            assert all(p.label == block.label for p in own)
            assert [p.starts_block for p in own] == [i == 0 for i in range(len(own))]
            assert_covers(block.text, [p.text for p in own])
        # Blocks are consecutive: pieces go block by block, in order.
        assert [p.block for p in pieces] == sorted(p.block for p in pieces)


@PROPS
@given(history=conversation(min_turns=2, max_turns=20), kappa=st.integers(10, 150))
def test_reader_pieces_are_labelled_with_the_speaker(history, kappa, tokenizer):
    msgs = [Message.from_dict(m) for m in history]
    for unit in pack_units(msgs, "reader", tokenizer, 500, final=True):
        pieces = cut_pieces("u", unit.blocks, tokenizer, kappa)
        for p in pieces:
            assert p.label == unit.messages[p.block].role
            assert p.text in unit.blocks[p.block].text


def test_piece_labels_name_the_step_and_its_command(tokenizer):
    msgs = [Message(role="assistant", content="THOUGHT: check\n```bash\npytest -x tests/test_a.py\n```"),
            Message(role="user", content="\n".join(f"line {i} of the test log" for i in range(200)))]
    unit = pack_units(msgs, "agent", tokenizer, 10, first_step=7, final=True)[0]
    pieces = cut_pieces("k", unit.blocks, tokenizer, 60)
    later = [p for p in pieces if p.block == 1 and not p.starts_block]
    assert later and all(p.label == "step 7: pytest -x tests/test_a.py" for p in later)
    assert pieces[0].text.startswith("[step 7] assistant")
    assert all(p.unit_key == "k" for p in pieces)


def test_a_block_is_one_turn(tokenizer):
    block = Block(header="Alice:", body="I moved to Lisbon on 2023-05-02.", label="Alice")
    pieces = cut_pieces("k", [block, block], tokenizer, 150)
    assert [p.text for p in pieces] == [block.text, block.text]
    assert [p.block for p in pieces] == [0, 1]


ws_run = st.builds(lambda c, n: c * n, st.sampled_from([" ", "\t", "\n", " \n", "\u3000"]), st.integers(1, 1500))
runs = st.lists(st.one_of(text(0, 20), ws_run), min_size=1, max_size=8).map("".join)


@PROPS
@given(body=runs, kappa=st.integers(8, 200))
def test_every_piece_is_a_slice_of_the_block_even_with_long_whitespace_runs(body, kappa, tokenizer):
    pos = 0
    for piece, n in cut_block(body, tokenizer, kappa):
        at = body.find(piece, pos)
        assert at >= 0, f"not a slice of the raw text: {piece[:60]!r}"
        assert n == tokenizer.count(piece) <= kappa
        pos = at + len(piece)
