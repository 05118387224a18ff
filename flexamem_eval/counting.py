"""Exact o200k token counts of long texts from the counts of their lines.

Methods re-render their memory text many times per call (a fitting loop drops one element
and counts again) and the harness counts every rendered context; the texts differ, but
they are made of the same lines. o200k_base cuts a text into regex chunks and encodes each
chunk alone, and a chunk never runs past a line break followed by a character that is not
whitespace and not ``/``: the chunk patterns that may hold a newline are ``\\s*[\\r\\n]+``,
``\\s+(?!\\S)`` and ``\\s+`` (whitespace only) and `` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*`` (which
may take more newlines and slashes after the newline, nothing else), none looks behind, and
the chunks after the cut start as they would in the rest of the text alone. So the count of
a text is the sum of the counts of its parts cut there, and each part's count is memoised
by the tokenizer: a text made of lines counted before costs a split and a few lookups.
Checked against whole-text counts on every rendered context of the dev data in the tests.
"""

from __future__ import annotations

import re
from typing import Any

#: Where a text may be cut: after a newline, before an ASCII character that is printable,
#: not a space and not "/" (non-ASCII characters are left uncut: their whitespace classes differ).
_CUT = re.compile(r"(?<=\n)(?=[!-.0-~])")
#: Shorter texts are counted whole (a split would cost more than it saves).
MIN_CHARS = 2_000


def line_additive(tokenizer: Any) -> bool:
    """Whether counts of ``tokenizer`` add up over such cuts (the o200k_base tiktoken counter)."""
    encoding = getattr(tokenizer, "encoding", None)
    return getattr(encoding, "name", None) == "o200k_base" and hasattr(tokenizer, "count")


class LineCounter:
    """A ``count``-only tokenizer view that counts long texts line by line (exactly)."""

    def __init__(self, tokenizer: Any) -> None:
        from flexamem_core.tokens import SAFE_WS_RUN

        self.tokenizer = tokenizer
        self.name = getattr(tokenizer, "name", "")
        self._max = SAFE_WS_RUN  # longer texts take the tokenizer's own bounded path

    def count(self, text: str) -> int:
        if len(text) < MIN_CHARS or len(text) >= self._max:
            return self.tokenizer.count(text)
        count = self.tokenizer.count
        return sum(count(part) for part in _CUT.split(text))

    def split(self, text: str, max_tokens: int) -> list[str]:
        return self.tokenizer.split(text, max_tokens)
