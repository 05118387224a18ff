"""What old steps revealed, shown beside their records: the identifiers a later command is
likely to reuse, ranked over the whole history and placed on the line of the unit that
first printed them.

An agent reuses exact strings it saw many steps back (a path ``grep`` found, the name a
failure printed); a record keeps the command and the head of its output, so those strings
leave the trace with the unit. Every agent note lists its unit's identifiers
(:mod:`flexamem_core.write.identifiers`); per call, the identifiers printed by an old unit,
absent from the task and from the recent window (which show them anyway), are ranked:

1. those the agent itself named in an assistant message (it noticed them),
2. then by how many messages contain them (printed again and again: a file being worked on),
3. then the most recently revealed first,

and taken in that order while they fit ``revealed_share`` of the memory's room. Each goes
on the timeline line of the unit that first printed it (``| revealed: a, b``), so the model
reads where it came from; the timeline keeps its order and stays a cacheable prefix: the
choice is made when the memory is rendered, and a cache-stable extension ranks again for
the window it leaves (``cache/extend.py``): the identifiers of the units it appends go on
their lines, those of older units not shown yet on one :data:`REVEALED_EARLIER` line.

The counts over the old units are kept incrementally per namespace (:class:`RevealedLedger`),
so a call costs the identifiers of its window and a partial sort of the candidates, not a
pass over the history.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..index.arrays import GrowableArray
from ..index.namespace import NamespaceIndex
from ..model.protocols import Tokenizer
from ..model.schema import Note
from ..write.identifiers import identifiers_in

#: How the identifiers of one line are introduced after its record.
REVEALED_MARK = " | revealed: "
#: The line an extended memory adds for identifiers of units it appended before.
REVEALED_EARLIER = "- Also revealed earlier: "
#: Candidates sorted exactly per call (the best by key); room rarely holds more.
_SORTED = 1024


@dataclass
class Revealed:
    """The identifiers chosen for one call, by the old unit that first printed them."""

    by_unit: dict[int, list[str]] = field(default_factory=dict)
    #: Estimated tokens of their suffixes (one mark per unit: an upper bound once merged).
    tokens: int = 0

    def suffix(self, positions: Iterable[int]) -> str:
        """The text after the line that shows old units ``positions`` ("" with none chosen)."""
        chosen = [s for p in positions for s in self.by_unit.get(p, ())]
        return f"{REVEALED_MARK}{', '.join(chosen)}" if chosen else ""

    def earlier_line(self, label: Callable[[int], str], before: int) -> str | None:
        """The :data:`REVEALED_EARLIER` line naming, by ``label`` of their position, the units
        before ``before`` whose identifiers were chosen (their own lines were sent already);
        None where none was."""
        earlier = [f"{label(pos)}: {', '.join(ids)}" for pos, ids in sorted(self.by_unit.items())
                   if pos < before and ids]
        return f"{REVEALED_EARLIER}{'; '.join(earlier)}" if earlier else None


class RevealedLedger:
    """Counts of every identifier over a chain of notes (the index's notes, in write order),
    grown as notes are written: where it was first printed, in how many outputs and
    assistant messages. A call over the first ``n`` of them takes the counts of the notes
    after ``n`` (its recent window, a few) back out, so what it ranks by is its own history."""

    def __init__(self) -> None:
        self.position: dict[str, int] = {}
        self.texts: list[str] = []
        self._intro = GrowableArray(np.int64)
        self._printed = GrowableArray(np.int64)
        self._named = GrowableArray(np.int64)
        self._tokens: dict[int, int] = {}
        self.notes: list[Note] = []

    def grow(self, notes: Sequence[Note]) -> bool:
        """Take in ``notes[len(self.notes):]``; False (nothing taken) when the notes taken in so
        far are not where ``notes`` has them (another chain: build a ledger of its own)."""
        have = len(self.notes)
        if have > len(notes) and notes:
            return self.notes[len(notes) - 1].unit_key == notes[-1].unit_key
        if have and notes[have - 1].unit_key != self.notes[-1].unit_key:
            return False
        intro, printed_at, named_at = self._intro, self._printed, self._named
        for pos in range(have, len(notes)):
            note = notes[pos]
            for text, printed, named in note.identifiers:
                i = self.position.get(text)
                if i is None:
                    i = self.position[text] = len(self.texts)
                    self.texts.append(text)
                    intro.append(pos if printed else -1)
                    printed_at.append(0)
                    named_at.append(0)
                elif printed and intro.view[i] < 0:
                    intro.view[i] = pos
                printed_at.view[i] += printed
                named_at.view[i] += named
            self.notes.append(note)
        return True

    def tokens(self, i: int, tokenizer: Tokenizer) -> int:
        n = self._tokens.get(i)
        if n is None:
            n = self._tokens[i] = tokenizer.count(self.texts[i])
        return n

    def choose(self, old: int, room: int, recent_text: str, fixed_text: str, tokenizer: Tokenizer,
               skip: Callable[[str], bool] | None = None, shown: str = "") -> Revealed:
        """The best identifiers (module docstring) first printed by old units ``< old`` within
        ``room`` tokens, counted over the first ``old`` notes and the recent text; ``skip``
        passes over those it is true of (shown already), and so does :func:`conveys` over
        those ``shown`` (the records they would sit beside) or a chosen one already conveys:
        ``query.py`` beside ``query.py:12`` spends room and shows nothing more."""
        out = Revealed()
        if room <= 0 or not self.texts:
            return out
        order = self._ranked(old, recent_text, fixed_text)
        intro = self._intro.view
        used, lines = 0, set()
        chosen: dict[int, int] = {}  # identifier -> its cost
        for i in order:
            text = self.texts[i]
            if skip is not None and skip(text):
                continue
            cost = self.tokens(i, tokenizer) + 1 + (0 if int(intro[i]) in lines else 4)
            if used + cost > room or conveys(shown, text) or any(conveys(self.texts[c], text) for c in chosen):
                continue
            for c in [c for c in chosen if conveys(text, self.texts[c])]:  # this one says them too
                used -= chosen.pop(c)
            chosen[i] = cost
            lines.add(int(intro[i]))
            used += cost
            if used >= room - 2:
                break  # no identifier is shorter than a token and its comma
        for i in sorted(chosen):  # in the order they were first printed
            out.by_unit.setdefault(int(intro[i]), []).append(self.texts[i])
        out.tokens = used
        return out

    def _counts(self, old: int, recent: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Messages that hold each identifier, and assistant messages that name it, over the
        first ``old`` notes and the recent text's identifiers (one message)."""
        named = self._named.view.copy()
        seen = self._printed.view + named
        for note in self.notes[old:]:  # after this call's old units: counted by the recent text
            for text, printed, n_named in note.identifiers:
                i = self.position[text]
                seen[i] -= printed + n_named
                named[i] -= n_named
        for s in recent:  # the newest steps name what they work on
            i = self.position.get(s)
            if i is not None:
                seen[i] += 1
                named[i] += 1
        return seen, named

    def _ranked(self, old: int, recent_text: str, fixed_text: str) -> list[int]:
        """The candidates, best first: printed by an old unit, not in the recent
        or fixed text; named first, then in most messages, then the newest (the best
        :data:`_SORTED` sorted exactly, the rest left out)."""
        recent = identifiers_in(recent_text)
        seen, named = self._counts(old, recent)
        intro = self._intro.view
        ok = (intro >= 0) & (intro < old)
        for s in (*recent, *identifiers_in(fixed_text)):  # shown there already
            i = self.position.get(s)
            if i is not None:
                ok[i] = False
        cand = np.flatnonzero(ok)
        key = (named[cand] > 0) * (1 << 42) + np.minimum(seen[cand], (1 << 21) - 1) * (1 << 21) + intro[cand]
        if len(cand) > _SORTED:
            top = np.argpartition(-key, _SORTED)[:_SORTED]
            cand, key = cand[top], key[top]
        return cand[np.lexsort((cand, -key))].tolist()


def conveys(text: str, identifier: str) -> bool:
    """Whether ``text`` shows ``identifier`` whole: as a word of its own, or as the path or
    name a longer one starts or ends with (``django/db/query.py`` in ``testbed/django/db/query.py:12``),
    not as the head of another name (``test_1`` in ``test_10``, ``models.Model`` in ``models.ModelForm``)."""
    if identifier not in text:  # the usual answer, without a pattern
        return False
    return _boundary(identifier).search(text) is not None


@functools.lru_cache(maxsize=4096)
def _boundary(identifier: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(identifier)}(?![A-Za-z0-9_])")


def revealed_ledger(index: NamespaceIndex, notes: Sequence[Note]) -> RevealedLedger:
    """A ledger that holds ``notes`` as its first notes: the namespace's (a per-process
    derivation of the index, grown to its notes) when they are the index's first notes, as
    they are but after an edit forked the history; else one of their own."""
    if notes and index.is_prefix(notes[0].unit_key, notes[-1].unit_key, len(notes)):
        ledger = index.derived.get("revealed")
        if ledger is None or not ledger.grow(index.notes):  # first use, or the index was rebuilt
            ledger = index.derived["revealed"] = RevealedLedger()
            ledger.grow(index.notes)
        return ledger
    own = RevealedLedger()
    own.grow(notes)
    return own
