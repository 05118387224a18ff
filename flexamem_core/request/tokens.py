r"""Token counting with o200k_base, offline, and safe on any input.

Offline route (an explicit choice): tiktoken downloads its BPE file from the internet on
first use. We vendor that exact file, ``data/o200k_base.tiktoken.gz`` (gzip of the
upstream file, sha256 446a9538...1a2d checked on load; MIT, see
``data/o200k_base.LICENSE``), and build the ``tiktoken.Encoding`` from it directly.
That costs 1.7 MB in the wheel but no network, no cache directory and no heavy
dependency (llama-index-core or litellm also carry the file, but nobody should have to
install a framework to count tokens).

Two tiktoken hazards are guarded here: ``encode`` rejects special-token text such as
``<|endoftext|>`` (we always use ``encode_ordinary``), and a run of about a million
whitespace characters makes it panic (a BaseException, a regex stack overflow). Counts
are exact except for a text holding a whitespace run of ``SAFE_WS_RUN`` characters or
more: such a run is counted as one token per UTF-8 byte (plus one per cut), an upper
bound, so a budget is never exceeded.

A long text is counted from the memoised counts of its parts cut after line breaks
(:func:`line_parts`), exactly: a render counts memory texts made of lines it has counted
before (records, pieces) with one element more or less each time, so most of its lines'
counts are memoised already. o200k_base cuts a text into regex chunks and encodes each
chunk alone, and no chunk runs past a line break followed by a character that is not
whitespace and not ``/``: the chunk patterns that may hold a newline are ``\s*[\r\n]+``,
``\s+(?!\S)`` and ``\s+`` (whitespace only) and `` ?[^\s\p{L}\p{N}]+[\r\n/]*`` (which may
take more newlines and slashes after the newline, nothing else); none looks behind, so the
chunks after such a cut are those of the rest of the text alone, and the count of the text
is the sum of its parts' counts (tested with hypothesis and on every dev render).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from itertools import islice

import tiktoken

from ..model.protocols import Tokenizer

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

# The o200k_base split pattern and special tokens, as defined in tiktoken_ext.openai_public.
_O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
_O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

#: Whitespace runs this long are counted as an upper bound (well below the ~1M at which tiktoken panics).
SAFE_WS_RUN = 100_000
_LONG_WS_RUN = re.compile(rf"\s{{{SAFE_WS_RUN},}}")
#: ``split`` cuts whitespace runs longer than this into chunks (parts only, never counts).
_WS_RUN = re.compile(r"\s{512,}")
_CHUNK = 512
#: Very long texts are encoded in slices cut at line breaks to bound regex work.
_SLICE_CHARS = 200_000
#: Where o200k_base counts add up (module docstring): after a newline, before an ASCII
#: character that is printable, not a space and not "/" (non-ASCII characters are left
#: uncut: their whitespace classes differ).
_CUT_CHARS = r"[!-.0-~]"
_LINE_CUT = re.compile(rf"(?<=\n)(?={_CUT_CHARS})")
_CUT_BEFORE = re.compile(_CUT_CHARS)
#: Shorter texts are counted whole (a split would cost more than it saves).
LINE_COUNT_MIN_CHARS = 2_000


def line_parts(text: str) -> list[str]:
    """``text`` cut where o200k_base token counts add up (see the module docstring)."""
    return _LINE_CUT.split(text)


def _outer_cuts(text: str) -> tuple[int, int] | None:
    """The first and the last position where :func:`line_parts` cuts ``text``, or None."""
    first = _LINE_CUT.search(text)
    if first is None:
        return None
    at = text.rfind("\n")
    while at + 1 >= first.start():  # the first cut is one: the walk back ends there at the latest
        if at + 1 < len(text) and _CUT_BEFORE.match(text, at + 1):
            return first.start(), at + 1
        at = text.rfind("\n", 0, at)
    raise AssertionError("unreachable: the first cut is a cut")


def count_concat(tokenizer: Tokenizer, segments: Sequence[tuple[str, int | None]]) -> int:
    """:meth:`TiktokenTokenizer.count_concat` where the tokenizer has it, else the count of
    the joined text (a given count is then not used)."""
    method = getattr(tokenizer, "count_concat", None)
    if method is not None:
        return int(method(segments))
    return tokenizer.count("".join(text for text, _ in segments))


@lru_cache(maxsize=1)
def load_o200k_encoding() -> tiktoken.Encoding:
    """Build o200k_base from the vendored BPE file, verifying its checksum."""
    raw = gzip.decompress(resources.files("flexamem_core.data").joinpath("o200k_base.tiktoken.gz")
                          .read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise RuntimeError(f"vendored o200k_base file is corrupt (sha256 {digest})")
    ranks = {base64.b64decode(tok): int(rank)
             for tok, rank in (line.split() for line in raw.splitlines() if line)}
    return tiktoken.Encoding(name="o200k_base", pat_str=_O200K_PATTERN,
                             mergeable_ranks=ranks, special_tokens=_O200K_SPECIAL)


class TiktokenTokenizer:
    """Counts tokens with a tiktoken encoding; counts are memoised per string."""

    def __init__(self, encoding: tiktoken.Encoding | None = None, cache_size: int = 200_000) -> None:
        self.encoding = encoding or load_o200k_encoding()
        self.name = self.encoding.name
        self._cache: dict[str, int] = {}
        self._cache_size = cache_size
        #: Whether counts add up over :func:`line_parts` (the o200k_base split pattern).
        self.line_additive = getattr(self.encoding, "_pat_str", None) == _O200K_PATTERN

    def count(self, text: str) -> int:
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        parts = line_parts(text) if self.line_additive and LINE_COUNT_MIN_CHARS <= len(text) < SAFE_WS_RUN \
            else None
        n = sum(self.count(p) for p in parts) if parts is not None and len(parts) > 1 else self.count_uncached(text)
        self._remember(text, n)
        return n

    def _remember(self, text: str, n: int) -> None:
        if len(self._cache) >= self._cache_size:
            # The oldest quarter goes, not the whole memo: a clear-all would make the next
            # renders count again every text they show.
            for key in list(islice(self._cache, max(1, self._cache_size // 4))):
                del self._cache[key]
        self._cache[text] = n

    def count_concat(self, segments: Sequence[tuple[str, int | None]]) -> int:
        """The count of the segments' texts joined, where a segment may come with its own count
        (exact, by this tokenizer: a unit's stored ``raw_tokens``). Of such a segment only the
        text before its first cut and after its last (:func:`line_parts`) is counted again,
        with what joins it: those cuts stay cuts in the whole (module docstring), so the part
        between them counts as it did alone.

        Why: a render shows the raw text of units written long ago, whose lines the memo
        has let go; counting them again would encode them on every call."""
        total, run, whole = 0, [], []
        for text, known in segments:
            whole.append(text)
            cuts = _outer_cuts(text) if known is not None and self.line_additive and len(text) < SAFE_WS_RUN \
                else None
            if cuts is None:
                run.append(text)
                continue
            head, tail = text[:cuts[0]], text[cuts[1]:]
            total += known - self.count(head) - self.count(tail)  # the part between the cuts
            run.append(head)
            total += self.count("".join(run))  # from a cut (or the start) to a cut
            run = [tail]
        total += self.count("".join(run))
        self._remember("".join(whole), total)
        return total

    def count_uncached(self, text: str) -> int:
        """The count of :meth:`count` without memoising it (for the many prefixes a cut tries)."""
        if len(text) < SAFE_WS_RUN:
            return len(self.encoding.encode_ordinary(text))
        total, pos = 0, 0
        for m in _LONG_WS_RUN.finditer(text):
            # Upper bound: a token is at least one byte; +1 per cut for a token crossing it.
            total += len(self.encoding.encode_ordinary(text[pos:m.start()])) + len(m.group().encode("utf-8"))
            total += (m.start() > 0) + (m.end() < len(text))
            pos = m.end()
        return total + len(self.encoding.encode_ordinary(text[pos:]))

    def split(self, text: str, max_tokens: int) -> list[str]:
        """Cut ``text`` into consecutive parts of at most ``max_tokens`` tokens each."""
        if max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        if self.count(text) <= max_tokens:
            return [text] if text else []
        parts: list[str] = []
        for chunk in _bounded_chunks(text):
            tokens = self.encoding.encode_ordinary(chunk)
            if len(tokens) <= max_tokens:
                parts.append(chunk)
                continue
            _, offsets = self.encoding.decode_with_offsets(tokens)
            cuts = [offsets[i] for i in range(0, len(tokens), max_tokens)] + [len(chunk)]
            parts.extend(chunk[a:b] for a, b in zip(cuts, cuts[1:]) if b > a)
        # Cutting can merge differently at boundaries: re-split any part still over.
        out: list[str] = []
        for p in parts:
            if self.count(p) <= max_tokens or len(p) <= 1:
                out.append(p)
            else:
                mid = len(p) // 2
                out.extend(self.split(p[:mid], max_tokens) + self.split(p[mid:], max_tokens))
        return out


def _slices(text: str) -> list[str]:
    if len(text) <= _SLICE_CHARS:
        return [text]
    out, start = [], 0
    while start < len(text):
        end = min(len(text), start + _SLICE_CHARS)
        if end < len(text):
            nl = text.rfind("\n", start + _SLICE_CHARS // 2, end)
            end = nl + 1 if nl > 0 else end
        out.append(text[start:end])
        start = end
    return out


def _bounded_chunks(text: str) -> list[str]:
    """Slices small enough to encode safely (whitespace runs cut to bounded chunks)."""
    out: list[str] = []
    for part in _slices(text):
        pos = 0
        for m in _WS_RUN.finditer(part):
            if m.start() > pos:
                out.append(part[pos:m.start()])
            run = m.group()
            out.extend(run[i:i + _CHUNK] for i in range(0, len(run), _CHUNK))
            pos = m.end()
        if pos < len(part):
            out.append(part[pos:])
    return out


@lru_cache(maxsize=1)
def default_tokenizer() -> TiktokenTokenizer:
    """The shared default tokenizer (o200k_base), loaded once per process."""
    return TiktokenTokenizer()
