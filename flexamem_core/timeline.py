"""The timeline: records of old units in time order, merged and hidden to fit.

Merges follow a fixed 4-ary hierarchy aligned on unit positions: records ``[4g, 4g+4)``
merge into one level-1 merged record, four aligned level-1 records into a level-2 one,
and so on. Merging goes lowest level first, oldest first, while the timeline is too
long. Because the groups are aligned, the same merged records recur call after call
(they are memoised in the store) and the timeline only ever changes at its newest end
or by a whole group folding up, which keeps the prompt prefix cacheable. When no
aligned group is left, the oldest few items are merged regardless of alignment; as a
last resort the oldest items are hidden for that call (their units stay stored).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .index import NamespaceIndex
from .protocols import RecordWriter, Tokenizer
from .schema import MergedRecord, Note, merge_key


@dataclass(frozen=True)
class TimelineItem:
    """A record (level 0) or a merged record covering old units ``[start, end)``."""

    start: int
    end: int
    level: int
    text: str
    line: str
    tokens: int
    merged_key: str | None = None


def record_line(note: Note) -> str:
    return f"- [{note.label}] {note.record}" if note.label else f"- {note.record}"


def merged_label(first: Note, last: Note) -> str:
    if first.last_step or last.last_step:
        return f"steps {first.first_step}-{last.last_step}"
    if first.label == last.label:
        return first.label
    return f"{first.label} .. {last.label}"


class Timeline:
    """Builds the timeline for one render over the old units (notes in time order)."""

    def __init__(self, notes: Sequence[Note], index: NamespaceIndex, writer: RecordWriter,
                 tokenizer: Tokenizer, fanin: int = 4) -> None:
        self.notes = notes
        self.index = index
        self.writer = writer
        self.tokenizer = tokenizer
        self.fanin = fanin
        self.llm_calls = 0
        self.items: list[TimelineItem] = [self._record_item(i, n) for i, n in enumerate(notes)]
        self.total = sum(it.tokens for it in self.items)
        self.hidden_until = 0

    def _count(self, line: str) -> int:
        return self.tokenizer.count(line) + 1  # + the newline that joins lines

    def _record_item(self, pos: int, note: Note) -> TimelineItem:
        cache_key = (pos, pos + 1, note.unit_key)
        item = self.index.timeline_items.get(cache_key)
        if item is None:
            line = record_line(note)
            item = self.index.timeline_items[cache_key] = TimelineItem(pos, pos + 1, 0, note.record, line,
                                                                       self._count(line))
        return item

    def _merge(self, group: Sequence[TimelineItem]) -> TimelineItem:
        start, end = group[0].start, group[-1].end
        # A unit key includes its parent's, so the last key names the whole covered chain.
        cache_key = (start, end, self.notes[end - 1].unit_key, self.writer.name)
        cached = self.index.timeline_items.get(cache_key)
        if cached is not None:
            return cached
        item = self._merge_uncached(group)
        self.index.timeline_items[cache_key] = item
        return item

    def _merge_uncached(self, group: Sequence[TimelineItem]) -> TimelineItem:
        start, end = group[0].start, group[-1].end
        level = max(it.level for it in group) + 1
        covers = tuple(n.unit_key for n in self.notes[start:end])
        key = merge_key(covers, self.writer.name)
        merged = self.index.get_merged(key)
        if merged is None:
            text, calls = self.writer.merge([it.text for it in group])
            self.llm_calls += calls
            merged = MergedRecord(key=key, covers=covers, text=text, tokens=self.tokenizer.count(text),
                                  level=level, writer=self.writer.name)
            self.index.put_merged(merged)
        line = f"- [{merged_label(self.notes[start], self.notes[end - 1])}] (merged) {merged.text}"
        return TimelineItem(start, end, level, merged.text, line, self._count(line), key)

    def _aligned_at(self, i: int, level: int) -> bool:
        span = self.fanin ** (level + 1)
        items = self.items
        if i + self.fanin > len(items) or items[i].start % span:
            return False
        group = items[i:i + self.fanin]
        return all(it.level == level for it in group) and group[-1].end == items[i].start + span

    def merge_down_to(self, target: float) -> None:
        """Merge (lowest level, oldest first) until the timeline is at most ``target`` tokens."""
        level = 0
        while self.total > target and any(it.level == level for it in self.items):
            out: list[TimelineItem] = []
            i = 0
            while i < len(self.items):
                if self.total > target and self._aligned_at(i, level):
                    group = self.items[i:i + self.fanin]
                    merged = self._merge(group)
                    self.total += merged.tokens - sum(it.tokens for it in group)
                    out.append(merged)
                    i += self.fanin
                else:
                    out.append(self.items[i])
                    i += 1
            self.items = out
            level += 1
        while self.total > target and len(self.items) > 1:
            group = self.items[: min(self.fanin, len(self.items))]
            merged = self._merge(group)
            if merged.tokens >= sum(it.tokens for it in group):
                break  # merging no longer shortens anything
            self.total += merged.tokens - sum(it.tokens for it in group)
            self.items = [merged, *self.items[len(group):]]

    def hide_down_to(self, target: float, keep: int = 0) -> None:
        """Hide the oldest items (for this call only) until at most ``target`` tokens,
        keeping at least the ``keep`` newest items."""
        while len(self.items) > keep and self.total > target:
            item = self.items.pop(0)
            self.total -= item.tokens
            self.hidden_until = item.end

    def item_of(self) -> dict[int, TimelineItem]:
        """Old-unit position -> the item showing it (units hidden are absent)."""
        return {pos: it for it in self.items for pos in range(it.start, it.end)}
