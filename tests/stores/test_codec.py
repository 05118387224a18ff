"""The storage encoding keeps any Python string exactly (issue 11, finding 9: two adjacent
lone surrogates used to read back from SQLite as one astral character)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from flexamem_core.stores.codec import dumps, loads, restored, storable

ANY_TEXT = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF))
SURROGATES = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1)
TEXT = st.one_of(ANY_TEXT, SURROGATES, st.sampled_from(["$flexamem_str32", "$flexamem_map16", "\ud83d\ude00"]))
VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), TEXT),
                      lambda inner: st.one_of(st.lists(inner, max_size=4),
                                              st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


def _same(a, b) -> bool:
    """Equal, with strings compared code point by code point."""
    if isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and list(a) == list(b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_any_value_reads_back_exactly_and_is_valid_utf8(value):
    text = dumps(value)
    text.encode("utf-8")  # any UTF-8 column accepts it
    assert _same(loads(text), value)
    kept, _tagged = storable(value)
    json.dumps(kept, ensure_ascii=False).encode("utf-8")  # any JSON serialiser accepts it
    assert _same(restored(kept) if _tagged else kept, value)


def test_adjacent_lone_surrogates_stay_two_code_points():
    pair = "\ud83d\ude00"
    assert len(pair) == 2 and list(loads(dumps(pair))) == ["\ud83d", "\ude00"]
    assert loads(dumps("😀")) == "😀"
