"""Cuts of messages larger than their room: the middle of a text replaced by a visible mark,
head and tail kept, tool calls and ids untouched."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..model.messages import Message
from ..model.protocols import Tokenizer
from .counting import PER_REQUEST, count_messages
from .layout import Layout

TRUNCATION_MARK = "\n[... {n} tokens of this output omitted by FlexA-Mem to fit the budget ...]\n"
#: Texts this short are not cut (the mark alone is about 20 tokens).
MIN_CUT_TOKENS = 48


def fit_messages(messages: Sequence[Message], room: int, tokenizer: Tokenizer,
                 outputs_first: bool = True) -> tuple[list[Message], int]:
    """Shrink the largest message texts (middle cut, marked) until they fit ``room`` tokens.

    Used only when the newest unit alone exceeds the budget: tool outputs and
    observations go first, assistant text last (``outputs_first=False``, a chat: the
    largest turn first, so a long reply is cut before the short question it answers);
    tool calls, ids and pairing are kept.
    Each cut keeps as much of the text as the room allows (head and tail, within a few
    tokens), not a fixed share. Returns the copies and how many cuts were made (the
    caller checks the final fit).
    """
    msgs = list(messages)
    cut = 0
    cuttable = set(range(len(msgs)))
    while cuttable:
        over = count_messages(msgs, tokenizer) - PER_REQUEST - room
        if over <= 0:
            break
        j = max(cuttable, key=lambda k: (outputs_first and msgs[k].role != "assistant",
                                         tokenizer.count(msgs[k].text), -k))
        text = msgs[j].text
        n = tokenizer.count(text)
        target = n - over  # what this text may take for the whole to fit
        new_text = text
        if n > MIN_CUT_TOKENS:
            keep = max(0, target - tokenizer.count(TRUNCATION_MARK.format(n=n)))
            new_text = middle_cut(text, keep, tokenizer)
            for _ in range(3):  # token merges at the two joins can add a token or two
                excess = tokenizer.count(new_text) - target
                if excess <= 0 or keep == 0:
                    break
                keep = max(0, keep - excess)
                new_text = middle_cut(text, keep, tokenizer)
        if tokenizer.count(new_text) >= n:
            cuttable.discard(j)  # cannot get shorter
            continue
        msgs[j] = replace(msgs[j], content=new_text, metadata={**msgs[j].metadata, "flexamem_truncated": True})
        cut += 1
        cuttable.discard(j)  # cut once, as far as needed (a second cut would nest the marks)
    return msgs, cut


def fit_fixed(layout: Layout, limit: int, tokenizer: Tokenizer, extra_tokens: int = 0) -> tuple[Layout, int]:
    """The layout with its task and current turn cut to fit ``limit``.

    The same rule as for any message larger than its room: the largest messages of those
    parts are cut in the middle with the visible mark, keeping head and tail, until the
    fixed prompt (system message, that part, ``extra_tokens``) takes at most ``limit``
    tokens. The system message is never cut; tool calls and ids are kept. Returns the
    layout (the same object when it already fits) and how many messages were cut; the
    caller checks that the cut part fits the budget (the marks take room too).
    """
    parts = [*layout.task, *layout.current]
    fixed = [*layout.fixed, *layout.current]
    if not parts or count_messages(fixed, tokenizer, extra_tokens) <= limit:
        return layout, 0
    prompt = count_messages([layout.system], tokenizer, extra_tokens) if layout.system else PER_REQUEST + extra_tokens
    cut, n = fit_messages(parts, limit - prompt, tokenizer, outputs_first=False)
    if not n:
        return layout, 0
    k = len(layout.task)
    return replace(layout, task=tuple(cut[:k]), current=tuple(cut[k:])), n


def middle_cut(text: str, keep: int, tokenizer: Tokenizer) -> str:
    """``text`` with its middle replaced by the mark: a head and a tail of ``keep`` tokens in all."""
    head = text[:_prefix_within(text, keep - keep // 2, tokenizer)]
    rest = text[len(head):]
    tail = rest[len(rest) - _prefix_within(rest, keep // 2, tokenizer, from_end=True):]
    omitted = tokenizer.count(text) - tokenizer.count(head) - tokenizer.count(tail)
    return head + TRUNCATION_MARK.format(n=max(1, omitted)) + tail


def _prefix_within(text: str, limit: int, tokenizer: Tokenizer, from_end: bool = False) -> int:
    """Length of the longest prefix (or suffix) of ``text`` counting at most ``limit`` tokens.

    Exponential then binary search on the length, counting only candidate parts, so the
    work is about the size of the part kept, not of the whole text."""
    if limit <= 0 or not text:
        return 0
    count = getattr(tokenizer, "count_uncached", tokenizer.count)

    def fits(length: int) -> bool:
        return count(text[len(text) - length:] if from_end else text[:length]) <= limit

    lo, hi = 0, min(len(text), 4 * limit)
    while hi < len(text) and fits(hi):
        lo, hi = hi, min(len(text), 2 * hi)
    if hi == len(text) and fits(hi):
        return hi
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo
