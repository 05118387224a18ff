"""The o200k_base tokenizer: offline load, special-token text, hostile inputs, split()."""

from __future__ import annotations

import gzip
import hashlib
from importlib import resources

import pytest
import tiktoken.load
from hypothesis import given, settings
from hypothesis import strategies as st

from flexamem_core.request.tokens import (
    LINE_COUNT_MIN_CHARS,
    O200K_SHA256,
    TiktokenTokenizer,
    line_parts,
    load_o200k_encoding,
)


def test_vendored_file_matches_its_checksum():
    raw = gzip.decompress(resources.files("flexamem_core.data").joinpath("o200k_base.tiktoken.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == O200K_SHA256


def test_loads_offline_and_encodes_like_o200k(tokenizer, monkeypatch):
    # No network: any attempt to download a BPE file would fail loudly.
    monkeypatch.setattr(tiktoken.load, "read_file", lambda *a, **k: pytest.fail("tried to download"))
    load_o200k_encoding.cache_clear()
    enc = load_o200k_encoding()
    assert enc.name == "o200k_base"
    assert enc.n_vocab == 200019
    # Well-known o200k ids: "hello world" is two tokens, and " world" is id 2375.
    assert enc.encode_ordinary("hello world") == [24912, 2375]
    assert tokenizer.count("hello world") == 2


def test_special_token_text_is_counted_as_ordinary_text(tokenizer):
    n = tokenizer.count("<|endoftext|>")
    assert n > 1  # spelled out, not the single special token, and no exception
    assert tokenizer.count("a <|endofprompt|> b") > 3


def test_empty_text_counts_zero(tokenizer):
    assert tokenizer.count("") == 0
    assert tokenizer.split("", 10) == []


def test_a_million_spaces_are_counted_without_crash_as_an_upper_bound(tokenizer):
    n = tokenizer.count(" " * 1_000_000)
    # tiktoken cannot encode it (it panics); 800,000 spaces it can: the bound is above that.
    assert len(tokenizer.encoding.encode_ordinary(" " * 800_000)) < n <= 1_000_000
    n = tokenizer.count("head " + "\n" * 300_000 + " tail")
    assert n >= len(tokenizer.encoding.encode_ordinary("head " + "\n" * 300_000 + " tail"))
    # Below the guarded length every count is exact, whitespace runs of any kind included.
    for text in (" " * 5000, "x" + " \n" * 30_000 + "y", "a" + "\u3000 " * 20_000, "\t" * 99_999):
        assert tokenizer.count(text) == len(tokenizer.encoding.encode_ordinary(text))


def test_a_very_long_single_line_is_counted(tokenizer):
    line = "x1y2z3_" * (300_000 // 7)
    n = tokenizer.count(line)
    assert n > 1000
    mixed = ("word " * 60_000)[:300_000] + "\n\n" + " " * 5000 + "\n" + ("x y " * 100_000)
    # Long texts are encoded whole: the count is exact, not sliced.
    assert tokenizer.count(mixed) == len(tokenizer.encoding.encode_ordinary(mixed))


def test_counts_are_memoised_per_string():
    tk = TiktokenTokenizer()
    text = "memoise me " * 10
    assert tk.count(text) == tk.count(text)
    assert text in tk._cache


def test_split_rejects_non_positive_limit(tokenizer):
    with pytest.raises(ValueError):
        tokenizer.split("abc", 0)


def _check_split(tokenizer, text: str, limit: int) -> None:
    # limit >= 4: one character is at most 4 UTF-8 bytes, so at most 4 tokens.
    parts = tokenizer.split(text, limit)
    assert "".join(parts) == text
    assert all(tokenizer.count(p) <= limit for p in parts)
    assert all(p for p in parts)


@settings(deadline=None, max_examples=60)
@given(text=st.text(min_size=0, max_size=800), limit=st.integers(4, 40))
def test_split_parts_fit_and_rejoin(text, limit, tokenizer):
    _check_split(tokenizer, text, limit)


@pytest.mark.parametrize("text", [
    " " * 3000,
    "A" * 5000,
    "日本語のテキスト" * 300,
    "emoji🙂🙂 " * 400,
    "line one\nline two\n" * 200,
    "\udcff lone surrogate \ud800 text " * 50,
])
def test_split_hostile_inputs(text, tokenizer):
    from flexamem_core.model.messages import clean_text

    _check_split(tokenizer, clean_text(text), 25)


def test_split_of_a_million_spaces(tokenizer):
    text = " " * 1_000_000
    parts = tokenizer.split(text, 150)
    assert "".join(parts) == text
    assert max(tokenizer.count(p) for p in parts[:50]) <= 150


#: Characters and runs around the cut points: newlines, returns, slashes (which the punctuation
#: chunk may take after a newline), other whitespace, punctuation, non-ASCII letters, emoji.
PARTS = st.sampled_from([*"ab Z9.,/-=[]()\n\r\t\u00a0\u2028\u3000é漢😀'\"#*_:;<>|~!", "'s", "'LL", "\n\n", "  ",
                         " /", "/\n", "\n/", ".\n", "x\n", "\n ", "\r\n", "123456", "<memory>", "== [s1] =="])


@settings(max_examples=1500, deadline=None)
@given(st.lists(PARTS, max_size=400))
def test_parts_cut_after_newlines_add_up(tokenizer, parts):
    text = "".join(parts)
    assert sum(tokenizer.count_uncached(p) for p in line_parts(text)) == tokenizer.count_uncached(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(PARTS, min_size=1, max_size=60), st.integers(1, 40))
def test_a_long_text_is_counted_exactly_from_its_lines(parts, repeat):
    text = "\n".join("".join(parts) for _ in range(repeat)) + "\n" + "x = 1\n" * (LINE_COUNT_MIN_CHARS // 3)
    tk = TiktokenTokenizer()  # nothing memoised: the parts are counted now
    assert tk.count(text) == len(tk.encoding.encode_ordinary(text))
    assert tk.count(text + "\ny = 2") == len(tk.encoding.encode_ordinary(text + "\ny = 2"))


def test_a_memory_text_is_counted_from_the_counts_of_its_lines():
    tk = TiktokenTokenizer()
    lines = [f"- [step {i}] ran `pytest -x tests/test_{i}.py`: 3 failed, /tmp/x{i}" for i in range(400)]
    text = "<memory>\n" + "\n".join(lines) + "\n</memory>"
    assert len(text) > LINE_COUNT_MIN_CHARS and tk.line_additive
    assert tk.count(text) == len(tk.encoding.encode_ordinary(text))
    assert lines[7] + "\n" in tk._cache, "its lines are memoised"
    shorter = text.replace(lines[7] + "\n", "")  # one element less: counted from memoised lines
    assert tk.count(shorter) == len(tk.encoding.encode_ordinary(shorter))
    whole = TiktokenTokenizer(tk.encoding)
    whole.line_additive = False
    assert whole.count(text) == tk.count(text) and lines[7] + "\n" not in whole._cache


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(st.lists(PARTS, max_size=80), st.booleans(), st.integers(0, 30)), min_size=1, max_size=8))
def test_joined_segments_are_counted_exactly_with_their_given_counts(segments):
    """A segment's own count (a stored ``raw_tokens``) stands for all of it but the text before
    its first cut and after its last, wherever it is joined: long and short segments, with or
    without cuts, after and before text that does or does not end or start one."""
    counter = TiktokenTokenizer()
    given_ = []
    for parts, known, lines in segments:
        text = "".join(parts) + "".join(f"\nline {i} = {i % 7}/x" for i in range(lines * 8))
        given_.append((text, counter.count(text) if known else None))
    joined = "".join(text for text, _ in given_)
    tk = TiktokenTokenizer(counter.encoding)  # nothing memoised
    assert tk.count_concat(given_) == len(tk.encoding.encode_ordinary(joined))
    assert tk._cache[joined] == tk.count_concat(given_), "the whole is memoised"


def test_a_given_count_is_used_for_what_lies_between_the_cuts():
    """Only the first and last lines of a segment with its count are counted again (a render
    passes only counts stored by a tokenizer of its name)."""
    tk = TiktokenTokenizer()
    raw = "[step 3] ran\n" + "".join(f"src/a_{i}.py:{i}: value = {i}\n" for i in range(50)) + "done."
    exact = len(tk.encoding.encode_ordinary(raw))
    encoded: list[str] = []
    counting = tk.count_uncached
    tk.count_uncached = lambda text: encoded.append(text) or counting(text)  # type: ignore[method-assign]
    assert tk.count_concat([("- [s] (raw)\n", None), (raw, exact), ("\n</memory>", None)]) == \
        len(tk.encoding.encode_ordinary("- [s] (raw)\n" + raw + "\n</memory>"))
    assert not any("src/a_7.py" in text for text in encoded), "the middle lines are not counted"
