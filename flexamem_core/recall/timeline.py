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

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from ..index.namespace import NamespaceIndex
from ..model.protocols import RecordWriter, Tokenizer
from ..model.schema import MergedRecord, Note, merge_key
from .revealed import Revealed


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
    """``- [label] record``; a record that already opens with its label (a conversation
    record starts with its date) is not labelled twice."""
    if not note.label or note.record.startswith(f"[{note.label}]"):
        return f"- {note.record}"
    return f"- [{note.label}] {note.record}"


def merged_label(first: Note, last: Note) -> str:
    if first.last_step or last.last_step:
        return f"steps {first.first_step}-{last.last_step}"
    if first.label == last.label:
        return first.label
    return f"{first.label} .. {last.label}"


#: Version of the timeline line format, part of a memoised line count's ``line_counter``.
LINE_FORMAT = 1


def merged_line(first: Note, last: Note, text: str) -> str:
    """The timeline line of a merged record covering ``first`` .. ``last``."""
    return f"- [{merged_label(first, last)}] (merged) {text}"


def _line_tokens(tokenizer: Tokenizer, line: str) -> int:
    return tokenizer.count(line) + 1  # + the newline that joins lines


def record_item(pos: int, note: Note, index: NamespaceIndex, tokenizer: Tokenizer) -> TimelineItem:
    """The timeline line of one record (memoised in the index)."""
    cache_key = (pos, pos + 1, note.unit_key)
    item = index.timeline_items.get(cache_key)
    if item is None:
        line = record_line(note)
        tokens = index.saved_line_tokens(pos, pos + 1, "", tokenizer.name)
        item = index.timeline_items[cache_key] = TimelineItem(
            pos, pos + 1, 0, note.record, line, tokens if tokens is not None else _line_tokens(tokenizer, line))
    return item


def count_record_lines(index: NamespaceIndex, tokenizer: Tokenizer) -> None:
    """Build the record line of every note not built yet, so that the snapshot saved next
    carries every record's token count: a store filled by ``ingest`` alone would otherwise
    be reopened by tokenizing each line of its history again. One count per unit written,
    not per save: built lines are memoised."""
    saved = index.saved_lines(tokenizer.name)  # counted already: saved again as they are
    for pos in range(index.records_counted, len(index.notes)):
        if (pos, pos + 1, "") not in saved:
            record_item(pos, index.notes[pos], index, tokenizer)
    index.records_counted = len(index.notes)


def merge_items(group: Sequence[TimelineItem], notes: Sequence[Note], index: NamespaceIndex,
                writer: RecordWriter, tokenizer: Tokenizer) -> tuple[TimelineItem, int]:
    """One merged item for an aligned group of items (memoised in the index and the store);
    returns it and the LLM calls it took."""
    start, end = group[0].start, group[-1].end
    level = max(it.level for it in group) + 1
    stored = stored_merge(start, end, level, notes, index, writer, tokenizer)
    if stored is not None:
        return stored, 0
    covers = tuple(n.unit_key for n in notes[start:end])
    merged, line, calls = _new_merge(group, covers, level, notes, writer, tokenizer)
    index.put_merged(merged)
    return _merged_item(start, end, level, merged, line, notes, index, writer, tokenizer), calls


def _new_merge(group: Sequence[TimelineItem], covers: tuple[str, ...], level: int, notes: Sequence[Note],
               writer: RecordWriter, tokenizer: Tokenizer) -> tuple[MergedRecord, str, int]:
    """The writer's merge of ``group`` as a record covering ``covers``, its line and LLM calls."""
    text, calls = writer.merge([it.text for it in group])
    line = merged_line(notes[group[0].start], notes[group[-1].end - 1], text)
    merged = MergedRecord(key=merge_key(covers, writer.name), covers=covers, text=text, tokens=tokenizer.count(text),
                          level=level, writer=writer.name, line_tokens=_line_tokens(tokenizer, line),
                          line_counter=f"{tokenizer.name}/{LINE_FORMAT}")
    return merged, line, calls


def item_key(item: TimelineItem, notes: Sequence[Note]) -> str:
    """The key a merge of ``item`` covers: its unit's for a record, else its merged record's."""
    return item.merged_key if item.merged_key is not None else notes[item.start].unit_key


def merge_unaligned_items(group: Sequence[TimelineItem], notes: Sequence[Note], index: NamespaceIndex,
                          writer: RecordWriter, tokenizer: Tokenizer) -> tuple[TimelineItem, int]:
    """One merged item for items that form no aligned group (the oldest few, once no aligned
    group is left); returns it and the LLM calls it took.

    Such a merge spans thousands of units in a long history and its span moves from call to
    call, so it is keyed by, and covers, the items it merges (a unit's key or a merged
    record's): its key, its store row and the stores' check that what it covers still exists
    cost the few items, not the units under them. Forgetting follows covers through merged
    records, so deleting a unit still drops it. Memoised by those keys too, not by span, where
    an aligned line of the same span could be taken for it."""
    covers = tuple(item_key(it, notes) for it in group)
    built = index.unaligned_items.get((writer.name, *covers))
    if built is not None:
        return built, 0
    level = max(it.level for it in group) + 1
    merged = index.get_merged(merge_key(covers, writer.name))
    calls = 0
    if merged is None:
        merged, line, calls = _new_merge(group, covers, level, notes, writer, tokenizer)
        index.put_merged(merged)
    else:
        line = merged_line(notes[group[0].start], notes[group[-1].end - 1], merged.text)
    tokens = merged.line_count(f"{tokenizer.name}/{LINE_FORMAT}")
    item = TimelineItem(group[0].start, group[-1].end, level, merged.text, line,
                        tokens if tokens is not None else _line_tokens(tokenizer, line), merged.key)
    index.unaligned_items[(writer.name, *covers)] = item
    return item, calls


def stored_merge(start: int, end: int, level: int, notes: Sequence[Note], index: NamespaceIndex,
                 writer: RecordWriter, tokenizer: Tokenizer) -> TimelineItem | None:
    """The merged item of old units ``[start, end)`` at ``level`` if ``writer`` merged them
    before (memoised in the index or the store), else None. Its text is the stored one, so
    the items it merged need not be built (a reopen shows merges of thousands of records)."""
    # A unit key includes its parent's, so the last key names the whole covered chain.
    cached = index.timeline_items.get((start, end, notes[end - 1].unit_key, writer.name))
    if cached is not None:
        return cached
    merged = index.get_merged(merge_key(tuple(n.unit_key for n in notes[start:end]), writer.name))
    if merged is None:
        return None
    line = merged_line(notes[start], notes[end - 1], merged.text)
    return _merged_item(start, end, level, merged, line, notes, index, writer, tokenizer)


def _merged_item(start: int, end: int, level: int, merged: MergedRecord, line: str, notes: Sequence[Note],
                 index: NamespaceIndex, writer: RecordWriter, tokenizer: Tokenizer) -> TimelineItem:
    """The timeline item of a merged record, memoised in the index."""
    tokens = merged.line_count(f"{tokenizer.name}/{LINE_FORMAT}")
    if tokens is None:
        tokens = index.saved_line_tokens(start, end, writer.name, tokenizer.name)
    item = TimelineItem(start, end, level, merged.text, line,
                        tokens if tokens is not None else _line_tokens(tokenizer, line), merged.key)
    index.timeline_items[(start, end, notes[end - 1].unit_key, writer.name)] = item
    return item


class Timeline:
    """The timeline of one render over the old units (notes in time order).

    Built either from scratch (:meth:`merge_down_to` walks every item; used when the old
    units are not the index's first notes, for example after an edit forked the chain) or
    from the items :class:`TimelineLevels` computed incrementally (the usual case).
    """

    def __init__(self, notes: Sequence[Note], index: NamespaceIndex, writer: RecordWriter,
                 tokenizer: Tokenizer, fanin: int = 4,
                 items: Sequence[TimelineItem] | None = None, llm_calls: int = 0) -> None:
        self.notes = notes
        self.index = index
        self.writer = writer
        self.tokenizer = tokenizer
        self.fanin = fanin
        self.llm_calls = llm_calls
        if items is None:
            items = [record_item(i, n, index, tokenizer) for i, n in enumerate(notes)]
        self.items: list[TimelineItem] = list(items)
        self.total = sum(it.tokens for it in self.items)
        self.hidden_until = 0
        self._starts: list[int] | None = None
        #: What old steps revealed, on their lines (:mod:`.revealed`); its tokens are not in
        #: ``total``: the room it takes was set apart before the timeline was sized.
        self.revealed: Revealed | None = None

    def line_of(self, item: TimelineItem) -> str:
        """The item's line, with what its units revealed."""
        return item.line + self.revealed.suffix(range(item.start, item.end)) if self.revealed else item.line

    def records_text(self) -> str:
        """The records this call shows, without what their units revealed."""
        return "\n".join(it.line for it in self.items if it.start >= self.hidden_until)

    def hidden_line(self) -> str:
        """The line that stands for the records hidden this call."""
        line = f"- [{self.hidden_until} earlier units not shown in this call]"
        return line + self.revealed.suffix(range(self.hidden_until)) if self.revealed else line

    def _merge(self, group: Sequence[TimelineItem], aligned: bool = True) -> TimelineItem:
        merge = merge_items if aligned else merge_unaligned_items
        item, calls = merge(group, self.notes, self.index, self.writer, self.tokenizer)
        self.llm_calls += calls
        return item

    def _aligned_at(self, i: int, level: int) -> bool:
        span = self.fanin ** (level + 1)
        items = self.items
        if i + self.fanin > len(items) or items[i].start % span:
            return False
        group = items[i:i + self.fanin]
        return all(it.level == level for it in group) and group[-1].end == items[i].start + span

    def merge_down_to(self, target: float) -> None:
        """Merge (lowest level, oldest first) until the timeline is at most ``target`` tokens."""
        self._starts = None
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
        self.merge_unaligned(target)

    def merge_unaligned(self, target: float) -> None:
        """No aligned group is left: merge the oldest few items regardless of alignment."""
        self._starts = None
        while self.total > target and len(self.items) > 1:
            group = self.items[: min(self.fanin, len(self.items))]
            merged = self._merge(group, aligned=False)
            if merged.tokens >= sum(it.tokens for it in group):
                break  # merging no longer shortens anything
            self.total += merged.tokens - sum(it.tokens for it in group)
            self.items = [merged, *self.items[len(group):]]

    def hide_down_to(self, target: float, keep: int = 0) -> None:
        """Hide the oldest items (for this call only) until at most ``target`` tokens,
        keeping at least the ``keep`` newest items."""
        n_hide = 0
        total = self.total
        while len(self.items) - n_hide > keep and total > target:
            total -= self.items[n_hide].tokens
            n_hide += 1
        if n_hide:
            self.hidden_until = self.items[n_hide - 1].end
            self.items = self.items[n_hide:]
            self.total = total
            self._starts = None

    def item_at(self, pos: int) -> TimelineItem | None:
        """The item showing old unit ``pos`` (None when it is hidden this call)."""
        if self._starts is None:
            self._starts = [it.start for it in self.items]
        i = bisect_right(self._starts, pos) - 1
        if i < 0:
            return None
        item = self.items[i]
        return item if item.start <= pos < item.end else None


class TimelineLevels:
    """The canonical timeline of :meth:`Timeline.merge_down_to`, computed incrementally.

    Over the index's notes in write order, the merge rule has a closed form: every level
    below some level ``L`` is merged completely, level ``L`` is merged for its ``j``
    oldest aligned groups, and the unaligned fallback applies only if all of that is still
    too long. Per level this class keeps the token counts of the merged lines made so far
    (oldest first, they never change) and the prefix sums of the tokens each merge saves,
    so a call finds ``L`` and ``j`` with a few array searches and builds only the items it
    shows, instead of walking the whole history. Everything here is derived from the notes,
    so a process that rebuilds it from the store renders byte-identically.

    A line whose token count the index's snapshot saved is counted from it and built only
    when a call shows it: a reopened namespace shows few of its lines, and building every
    one would hash each merged line's key and read its record.
    """

    def __init__(self, index: NamespaceIndex, writer: RecordWriter, tokenizer: Tokenizer, fanin: int) -> None:
        self.index = index
        self.writer = writer
        self.tokenizer = tokenizer
        self.fanin = fanin
        #: records[p]: the record line of note p, or None until shown (its count was saved).
        self.records: list[TimelineItem | None] = []
        self._record_sums = [0]
        #: merged[L][g]: the merge of aligned group g of level L (an item of level L + 1), or
        #: None until shown; merged_tokens[L][g]: its line's tokens.
        self.merged: list[list[TimelineItem | None]] = []
        self.merged_tokens: list[list[int]] = []
        #: saved[L][g]: tokens saved by merging groups 0..g-1 of level L.
        self.saved: list[list[int]] = []
        #: most_saved[L][g]: the most of 0 and saved[L][1..g] (a merge can lengthen a line, so saved
        #: may fall): ascending, so the first fit is a binary search, not a pass per call.
        self.most_saved: list[list[int]] = []
        #: LLM calls made building lines that were counted, not built, before (0 where the
        #: store kept their merges, as it does for every line a snapshot counted).
        self._late_calls = 0

    def _grow_records(self, n: int) -> None:
        notes, built = self.index.notes, self.index.timeline_items
        saved = self.index.saved_lines(self.tokenizer.name)
        while len(self.records) < n:
            pos = len(self.records)
            item = built.get((pos, pos + 1, notes[pos].unit_key))
            tokens = item.tokens if item is not None else saved.get((pos, pos + 1, ""))
            if tokens is None:
                item = record_item(pos, notes[pos], self.index, self.tokenizer)
                tokens = item.tokens
            self.records.append(item)
            self._record_sums.append(self._record_sums[-1] + tokens)

    def _input_tokens(self, level: int, first: int, stop: int) -> int:
        """Tokens of the lines ``first .. stop - 1`` of ``level`` (records at level 0)."""
        if level == 0:
            return self._record_sums[stop] - self._record_sums[first]
        return sum(self.merged_tokens[level - 1][first:stop])

    def _item(self, level: int, i: int) -> TimelineItem:
        """Line ``i`` of ``level`` (record ``i`` at level 0, else the merge of group ``i`` of
        level - 1), built if it was only counted so far."""
        if level == 0:
            item = self.records[i]
            if item is None:
                item = self.records[i] = record_item(i, self.index.notes[i], self.index, self.tokenizer)
            return item
        item = self.merged[level - 1][i]
        if item is None:
            span = self.fanin ** level
            item = stored_merge(span * i, span * (i + 1), level, self.index.notes, self.index, self.writer,
                                self.tokenizer)
            if item is None:  # its record was lost: merged again, from the items it merges
                group = self._items(level - 1, self.fanin * i, self.fanin * (i + 1))
                item, calls = merge_items(group, self.index.notes, self.index, self.writer, self.tokenizer)
                self._late_calls += calls
            self.merged[level - 1][i] = item
        return item

    def _items(self, level: int, first: int, stop: int) -> list[TimelineItem]:
        return [self._item(level, i) for i in range(first, stop)]

    def _group(self, level: int, g: int) -> int:
        """Make sure group ``g`` of ``level`` is merged (counted at least); returns the LLM
        calls that took."""
        while len(self.merged) <= level:
            self.merged.append([])
            self.merged_tokens.append([])
            self.saved.append([0])
            self.most_saved.append([0])
        calls = 0
        span = self.fanin ** (level + 1)  # units a merge of this level covers: groups are aligned
        notes, built = self.index.notes, self.index.timeline_items
        saved = self.index.saved_lines(self.tokenizer.name)
        name = self.writer.name
        while len(self.merged[level]) <= g:
            k = len(self.merged[level])
            start, end = k * span, (k + 1) * span
            item = built.get((start, end, notes[end - 1].unit_key, name))
            tokens = item.tokens if item is not None else saved.get((start, end, name))
            if tokens is None and start < self.index.saved_covers:  # merged before the snapshot was saved?
                tokens = self.index.merged_line_tokens(self.tokenizer.name, LINE_FORMAT).get((start, end, name))
            if tokens is None:
                group = self._items(level, self.fanin * k, self.fanin * (k + 1))
                item, c = merge_items(group, notes, self.index, self.writer, self.tokenizer)
                calls += c
                tokens = item.tokens
            self.merged[level].append(item)
            self.merged_tokens[level].append(tokens)
            self.saved[level].append(self.saved[level][-1]
                                     + self._input_tokens(level, self.fanin * k, self.fanin * (k + 1)) - tokens)
            self.most_saved[level].append(max(self.most_saved[level][-1], self.saved[level][-1]))
        return calls

    def _first_fit(self, level: int, groups: int, total: int, target: float) -> tuple[int, int]:
        """The fewest oldest groups of ``level`` whose merge brings ``total`` within ``target``
        (all ``groups`` if none do), merging groups not merged before; returns (j, LLM calls)."""
        have = min(groups, len(self.merged[level]) if level < len(self.merged) else 0)
        if have:
            # the first g whose merges fit: the first where the most saved so far does
            j = bisect_left(self.most_saved[level], True, 1, have + 1, key=lambda s: total - s <= target)
            if j <= have:
                return j, 0
        j, calls = have, 0
        while j < groups:
            calls += self._group(level, j)
            j += 1
            if total - self.saved[level][j] <= target:
                break
        return j, calls

    def build(self, notes: Sequence[Note], target: float) -> Timeline:
        """The timeline of the first ``len(notes)`` notes merged down to ``target`` tokens
        (the same items as ``Timeline(notes).merge_down_to(target)``)."""
        n = len(notes)
        self._late_calls = 0
        self._grow_records(n)
        total = self._record_sums[n]
        calls = 0
        counts = [n]  # items at each level before its merges
        merged_at: list[int] = []  # oldest groups merged at each level
        level = 0
        while counts[level] > 0 and total > target:
            groups = counts[level] // self.fanin
            j, c = self._first_fit(level, groups, total, target)
            calls += c
            if j:
                total -= self.saved[level][j]
            merged_at.append(j)
            if j < groups or total <= target or groups == 0:
                break
            counts.append(groups)
            level += 1
        if not merged_at:
            items = self._items(0, 0, n)
        else:
            top = len(merged_at) - 1
            items = self._items(top + 1, 0, merged_at[top])
            for lv in range(top, -1, -1):
                items.extend(self._items(lv, self.fanin * merged_at[lv], counts[lv]))
        timeline = Timeline(notes, self.index, self.writer, self.tokenizer, self.fanin, items,
                            calls + self._late_calls)
        timeline.merge_unaligned(target)
        return timeline
