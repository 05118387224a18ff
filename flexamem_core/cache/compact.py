"""Compacting a memory that can grow no more: its leading records kept as they were sent, the
units after them merged into a timeline of their own.

An extension appends to the previous memory until the memory reaches the cap the paper's render
would give it. A fresh render would then merge the whole timeline again, and its changed early
lines would break the cached prefix at the memory's start. A compaction keeps the memory's
leading record lines, those its render wrote before any recovered text (``Outcome.records``),
as they were sent; it drops what followed them (recovered text, the records and identifiers
extensions appended) and shows every unit after them, up to the newest, as one timeline merged
oldest first, as a render merges, until the memory is within ``stable_target`` of its cap,
what old steps revealed on its lines. The fixed prompt and the kept lines stay a cached
prefix, and the rest of the cap is left for the next extensions. Where the kept lines leave
no such room, the request is rendered afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..config import FlexAMemConfig
from ..index.namespace import NamespaceIndex
from ..model.protocols import RecordWriter, Tokenizer
from ..model.schema import Unit
from ..recall.assembly import MEMORY_CLOSE
from ..recall.report import timeline_runs
from ..recall.revealed import Revealed, revealed_ledger
from ..recall.timeline import Timeline
from ..write.identifiers import identifiers_in


@dataclass
class Compacted:
    """The compacted memory before its fresh detail: the kept text and the new lines."""

    #: The kept leading records (ending with a newline).
    kept: str
    #: The merged timeline's lines, then any line of identifiers revealed before the kept units.
    lines: list[str]
    #: Tokens of the memory text made of ``kept``, ``lines`` and the closing tag.
    tokens: int
    #: The old units as runs ``[start, end, resolution]``: the kept ones', then the timeline's.
    runs: list[list[Any]]
    #: (characters, old units) of the leading record lines of the compacted memory.
    records: tuple[int, int]
    #: Calls to an LLM record writer that merged the timeline's records.
    llm_calls: int = 0


def compact(index: NamespaceIndex, units: Sequence[Unit], kept: str, kept_units: int, n_old: int,
            runs: Sequence[Sequence[Any]], recent_text: str, fixed_text: str, cfg: FlexAMemConfig,
            writer: RecordWriter, tokenizer: Tokenizer, mem_cap: int) -> Compacted | None:
    """The memory keeping ``kept`` (the previous memory's leading records, showing its first
    ``kept_units`` old units as ``runs`` say) with the old units up to ``n_old`` after it (module
    docstring); None where no timeline of them fits ``stable_target`` of ``mem_cap``."""
    target = int(cfg.tuning.stable_target * mem_cap)
    kept_tokens = tokenizer.count(kept + MEMORY_CLOSE)
    if n_old <= kept_units or kept_tokens >= target:
        return None
    revealed = Revealed()
    if cfg.history == "agent" and cfg.tuning.revealed_share > 0:
        room = min(int(cfg.tuning.revealed_share * mem_cap), cfg.tuning.revealed_tokens, target - kept_tokens)
        shown = set(identifiers_in(kept))  # one pass: most candidates shown are passed over without a search
        revealed = revealed_ledger(index, index.notes_of_units(units[:n_old])).choose(
            n_old, room, recent_text, fixed_text, tokenizer, skip=shown.__contains__, shown=kept)
    earlier = revealed.earlier_line(lambda pos: index.note(units[pos].key).label, kept_units)
    earlier_line = [earlier] if earlier else []
    timeline = Timeline(index.notes_of_units(units[kept_units:n_old]), index, writer, tokenizer,
                        cfg.tuning.merge_fanin)
    room = target - kept_tokens - revealed.tokens  # the identifiers' room set apart, as a render sets it
    timeline.merge_down_to(room)
    if timeline.total > room:
        return None
    timeline.revealed = Revealed({pos - kept_units: ids for pos, ids in revealed.by_unit.items()
                                  if pos >= kept_units}, revealed.tokens)
    lines = [timeline.line_of(item) for item in timeline.items]
    text = kept + "".join(f"{line}\n" for line in [*lines, *earlier_line])
    tokens = tokenizer.count(text + MEMORY_CLOSE)
    if tokens > mem_cap:
        return None
    merged = [[kept_units + a, kept_units + b, res] for a, b, res in timeline_runs(timeline)]
    records = (len(kept) + sum(len(line) + 1 for line in lines), n_old)
    return Compacted(kept, [*lines, *earlier_line], tokens, [*map(list, runs), *merged], records,
                     timeline.llm_calls)
