"""Recovery of detail into the memory: unit recovery (fit-or-degrade) and piece recovery.

Both start from the timeline of old units and spend the room it leaves. Unit recovery
visits candidate units (seeds by cosine, their links and time neighbours, discounted by
lambda) and gives each the highest resolution that fits: raw text, an excerpt of its
BM25-best pieces, or just its record. Piece recovery spends the room on the best BM25
pieces of the whole history instead. A final loop drops the lowest-ranked recovered
element while the memory is over the allowance, so the allowance always holds.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import FlexAMemConfig
from ..index.arrays import take_ascending
from ..index.fusion import DenseRanking, Ranking, fused_over, fused_ranking, ranks
from ..index.namespace import NamespaceIndex, top_k
from ..model.protocols import Tokenizer
from ..model.schema import Note, Piece
from ..request.tokens import count_concat
from .report import timeline_runs, unit_rows
from .timeline import Timeline

MEMORY_OPEN = "<memory>"
MEMORY_CLOSE = "</memory>"
MEMORY_INTRO = ("Earlier history, oldest first: one record per unit; entries marked raw, excerpt "
                "or piece are verbatim text of that history.")
PIECES_HEADER = "Recovered pieces (verbatim, grouped by unit in time order; ... marks omitted text):"


@dataclass
class Candidate:
    """A unit that unit recovery visits, with its score g and why it was reached."""

    pos: int
    score: float
    why: str


#: A text in parts, each with its exact count where one is stored (else None).
Segments = tuple[tuple[str, int | None], ...]


def stored_raw_tokens(note: Note, tokenizer: Tokenizer) -> int | None:
    """The note's count of its unit's raw text where a tokenizer of this name made it, else None."""
    return note.raw_tokens if note.counted_by == tokenizer.name else None


@dataclass
class Element:
    """Recovered text for one unit (or the pieces of one unit) placed into the timeline."""

    pos: int
    rank: int
    resolution: str
    text: str
    tokens: int
    in_place: bool
    #: ``text`` in parts, each with its exact count where one is stored (a raw unit's text,
    #: counted by this tokenizer when written): :meth:`Assembler.measure` counts only the rest.
    parts: Segments = ()

    def segments(self) -> Segments:
        return self.parts or ((self.text, None),)


@dataclass
class MemoryRender:
    text: str
    tokens: int
    spent: dict[str, int]
    #: Rows of the units this call did something with (:mod:`.unit_report`).
    units: list[dict[str, Any]] = field(default_factory=list)
    pieces: list[dict[str, Any]] = field(default_factory=list)
    #: The old units' positions as timeline runs ``[start, end, resolution]``.
    unit_runs: list[list[Any]] = field(default_factory=list)
    llm_calls: int = 0
    #: Recovered elements chosen but dropped by the final shrink loop (framing underestimated).
    dropped: int = 0
    #: Piece recovery: the tokens the chosen pieces were charged before choosing (their own
    #: and their framing: lines, marks, labels, headers), to compare with what was shown.
    charged: int = 0
    #: ``mode="auto"``: what the rule chose for this call and why (``report["auto"]``).
    auto: dict[str, Any] | None = None


class _Prefix:
    """Key -> position for old units that are exactly the first ``n`` notes of the index
    (the index's own map, read in place of a dict of every old unit made per call)."""

    def __init__(self, position: dict[str, int], n: int) -> None:
        self.position = position
        self.n = n

    def __contains__(self, key: object) -> bool:
        return self.position.get(key, self.n) < self.n  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> int:
        if key not in self:
            raise KeyError(key)
        return self.position[key]


def positions(notes: Sequence[Note], index: NamespaceIndex) -> Mapping[str, int]:
    """Each old unit's position among ``notes``, by key."""
    if notes and index.is_prefix(notes[0].unit_key, notes[-1].unit_key, len(notes)):
        return _Prefix(index.position, len(notes))
    return {nt.unit_key: p for p, nt in enumerate(notes)}


def candidates(q_vec: np.ndarray, notes: Sequence[Note], index: NamespaceIndex,
               cfg: FlexAMemConfig, query_text: str) -> list[Candidate]:
    """Candidates in decreasing g: seeds, their links and time neighbours (Eq. 2)."""
    n = len(notes)
    if n == 0:
        return []
    if cfg.random_candidates:
        seed = int.from_bytes(hashlib.sha256(query_text.encode("utf-8", "replace")).digest()[:8], "big")
        order = list(range(n))
        random.Random(seed).shuffle(order)
        return [Candidate(p, 0.0, "random") for p in order]
    if index.is_prefix(notes[0].unit_key, notes[-1].unit_key, n):
        # The usual case: the old units are the first n notes written (positions only increase).
        rows = np.arange(n, dtype=np.int64)
        cos = index.note_cosines(q_vec)[:n]
    else:
        rows = np.fromiter((index.position[nt.unit_key] for nt in notes), dtype=np.int64, count=n)
        cos = index.note_cosines(q_vec)[rows]
    pos_of = positions(notes, index)
    if cfg.fused_seeds and cfg.fusion != "bm25":
        best_piece = _best_piece_scores(notes, rows, index, query_text, q_vec, cfg)
        # the old notes' ranks, kept by the index: the piece ranking by notes made them
        cos_ranks = index.note_cosine_ranks(q_vec, n) if rows[-1] == n - 1 else None
        cos = _fused_units(cos, best_piece, cfg, cos_ranks)
    seeds = top_k(cos, cfg.seeds)
    best: dict[int, tuple[float, str]] = {}

    def reach(p: int, score: float, why: str) -> None:
        if p not in best or score > best[p][0]:
            best[p] = (score, why)

    for s in seeds:
        s = int(s)
        c = float(cos[s])
        reach(s, c, "seed")
        for key in sorted(index.links_of(notes[s].unit_key)):
            if key in pos_of and pos_of[key] != s:
                reach(pos_of[key], cfg.link_discount * c, "link")
        for nb in (s - 1, s + 1):
            if 0 <= nb < n:
                reach(nb, cfg.link_discount * c, "time neighbour")
    return [Candidate(p, sc, why) for p, (sc, why) in sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))]


def _best_piece_scores(notes: Sequence[Note], rows: np.ndarray, index: NamespaceIndex, query_text: str,
                       q_vec: np.ndarray, cfg: FlexAMemConfig) -> np.ndarray:
    """Per old unit, the fused score (BM25 with ``query_text`` and cosine with ``q_vec``) of its
    best piece; -inf for a unit without pieces."""
    n_docs = len(index.doc_unit)
    best = np.full(len(notes), -np.inf)
    if n_docs == 0:
        return best
    bm25 = index.bm25.scores(index.bm25.query_terms(query_text, cfg.query_terms))
    docs = old_docs(notes, index)
    if len(docs) == 0:
        return best
    to_old = np.full(len(index.notes), -1, dtype=np.int64)
    to_old[rows] = np.arange(len(notes))
    groups = index.note_groups(docs, q_vec) if cfg.fusion == "rrf" else None
    if groups is not None:
        # Ranked by their notes (agents): a note's pieces hold consecutive cosine ranks from
        # its first, so a unit's best piece is its first or one with a lexical match. The same
        # values as the dense fusion below, at the cost of the units and the matching pieces.
        w, k = cfg.fusion_weight, cfg.fusion_k
        best[to_old[index.doc_note_array()[docs[groups.starts]]]] = w / (k + groups.first)
        lexical = take_ascending(bm25, docs)
        hit = np.flatnonzero(lexical > 0)
        if len(hit):
            fused_hit = w / (k + groups.ranks_at(hit))
            fused_hit += (1.0 - w) / (k + ranks(lexical[hit]))
            np.maximum.at(best, to_old[index.doc_note_array()[docs[hit]]], fused_hit)
        return best
    fused = fused_over(docs, bm25, q_vec, index, cfg, n_docs)
    owner = to_old[index.doc_note_array()[docs]]
    values = fused[docs]
    if len(owner) > 1 and bool((owner[1:] < owner[:-1]).any()):  # sorted when the old units are a prefix
        order = np.argsort(owner, kind="stable")
        owner, values = owner[order], values[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    best[owner[starts]] = np.maximum.reduceat(values, starts)
    return best


def _fused_units(note_cos: np.ndarray, best_piece: np.ndarray, cfg: FlexAMemConfig,
                 cos_ranks: np.ndarray | None = None) -> np.ndarray:
    """Seed scores: the note cosine ranking and the best-piece ranking of the units, fused by
    reciprocal ranks (weight ``fusion_weight`` on the pieces). ``cos_ranks``: ``ranks(note_cos)``
    when the caller has them."""
    w = cfg.fusion_weight
    out = (1.0 - w) / (cfg.fusion_k + (ranks(note_cos) if cos_ranks is None else cos_ranks))
    has = np.isfinite(best_piece)
    if has.any():
        out[has] += w / (cfg.fusion_k + ranks(best_piece[has]))
    return out


def excerpt_scores(index: NamespaceIndex, ranges: Sequence[range], query_text: str, q_vec: np.ndarray,
                   cfg: FlexAMemConfig) -> np.ndarray:
    """Scores (dense over all piece documents, 0 outside ``ranges``) that rank the excerpt
    pieces of the candidate units: BM25 for ``query_text``, fused with the stored piece
    cosines unless ``fused_excerpts`` is off (then only BM25 matches are excerpted)."""
    bm25 = index.bm25.scores_in(index.bm25.query_terms(query_text, cfg.query_terms), ranges)
    if not cfg.fused_excerpts or cfg.fusion == "bm25":
        return bm25
    docs = np.unique(np.concatenate([np.arange(r.start, r.stop) for r in ranges if len(r)] or
                                    [np.zeros(0, dtype=np.int64)])).astype(np.int64)
    return fused_over(docs, bm25, q_vec, index, cfg, len(bm25))


def focus_first(cands: Sequence[Candidate], notes: Sequence[Note], index: NamespaceIndex,
                words: set[str]) -> list[Candidate]:
    """The candidates with the old unit holding the best BM25 piece for ``words`` first.

    Cosine over a whole unit cannot tell which of thirty similar outputs printed the token
    a user asks about; the lexical match can."""
    if not words or not notes:
        return list(cands)
    ranges = [index.unit_docs.get(nt.unit_key, range(0)) for nt in notes]
    scores = index.bm25.scores_in(words, ranges)
    best, best_pos = 0.0, -1
    for pos, r in enumerate(ranges):
        if len(r):
            top = float(scores[r.start:r.stop].max())
            if top > best:
                best, best_pos = top, pos
    if best_pos < 0:
        return list(cands)
    rest = [c for c in cands if c.pos != best_pos]
    own = next((c.score for c in cands if c.pos == best_pos), 0.0)  # its g, if reached at all
    return [Candidate(best_pos, own, "focus match"), *rest]


def piece_runs(pieces: Sequence[Piece]) -> list[list[Piece]]:
    """Pieces (in order) grouped into runs of consecutive pieces of their unit."""
    runs: list[list[Piece]] = []
    for p in pieces:
        if runs and p.index == runs[-1][-1].index + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def piece_spans(plist: Sequence[Piece], raw: str) -> list[tuple[int, int]] | None:
    """Where each piece of a unit lies in its raw text (pieces are slices, in order, separated
    only by whitespace), or None if the raw text does not hold them."""
    spans, at = [], 0
    for p in plist:
        start = raw.find(p.text, at)
        if start < 0:
            return None
        at = start + len(p.text)
        spans.append((start, at))
    return spans


def omission_join(pieces: Sequence[Piece], total: int, raw: str | None = None,
                  spans: Sequence[tuple[int, int]] | None = None) -> str:
    """Pieces in order as runs of verbatim text: a run that does not begin its turn or block is
    labelled once, where it starts; '...' only where text was left out.

    With the unit's ``raw`` text and :func:`piece_spans`, a run is the slice of the raw text
    from its first piece to the end of its last, so it reads exactly as it was written;
    without them its pieces are joined by newlines."""
    out: list[str] = []
    runs = piece_runs(pieces)
    for k, run in enumerate(runs):
        if run[0].index != (runs[k - 1][-1].index + 1 if k else 0):
            out.append("...")
        if raw is not None and spans is not None:
            text = raw[spans[run[0].index][0]:spans[run[-1].index][1]]
        else:
            text = "\n".join(p.text for p in run)
        out.append(text if run[0].starts_block else f"[{run[0].label}] {text}")
    if pieces and pieces[-1].index != total - 1:
        out.append("...")
    return "\n".join(out)


def verbatim_join(pieces: Sequence[Piece], plist: Sequence[Piece], raw_of: Callable[[], str]) -> str:
    """:func:`omission_join` of a unit's pieces, reading the raw text only when a run has more
    than one piece (a single piece is already verbatim)."""
    if len(piece_runs(pieces)) == len(pieces):
        return omission_join(pieces, len(plist))
    raw = raw_of()
    return omission_join(pieces, len(plist), raw, piece_spans(plist, raw))


def _joined_estimate(pieces: Sequence[Piece], total: int, tokenizer: Tokenizer) -> int:
    """Token estimate of :func:`omission_join` from the pieces' stored counts: the pieces, one
    separator between neighbours, a label per run that starts mid-block, the marks."""
    runs = piece_runs(pieces)
    marks = sum(1 for k, run in enumerate(runs) if run[0].index != (runs[k - 1][-1].index + 1 if k else 0))
    marks += 1 if pieces and pieces[-1].index != total - 1 else 0
    labels = sum(tokenizer.count(f"[{run[0].label}] ") for run in runs if not run[0].starts_block)
    return sum(p.tokens + 1 for p in pieces) + 2 * marks + labels


def best_pieces(docs: range, scores: np.ndarray, index: NamespaceIndex, limit: int) -> list[int]:
    """Docs of one unit with the best positive scores, greedily within ``limit`` tokens."""
    if len(docs) == 0:
        return []
    local = scores[docs.start:docs.stop]
    hits = np.flatnonzero(local > 0)
    order = hits[np.lexsort((hits, -local[hits]))]
    chosen, used = [], 0
    tokens = index.doc_tokens_array()
    for i in order:
        t = int(tokens[docs.start + i])
        if used + t <= limit:
            chosen.append(docs.start + int(i))
            used += t
    return sorted(chosen)


def memory_wrapper_tokens(tokenizer: Tokenizer) -> int:
    """Tokens of the memory message around its lines: the tags, the introduction, and room
    for the line that says how many units are hidden."""
    return tokenizer.count(f"{MEMORY_OPEN}\n{MEMORY_INTRO}\n{MEMORY_CLOSE}") + 16


class Assembler:
    """Joins the timeline and recovered elements into the memory text, and counts it.

    Recovered text goes in place of its record, or after the item that shows its unit
    (a merged record), or, with ``detail_after``, after the whole timeline in time order.
    """

    def __init__(self, timeline: Timeline, tokenizer: Tokenizer, detail_after: bool = False) -> None:
        self.timeline = timeline
        self.tokenizer = tokenizer
        self.detail_after = detail_after

    def text(self, elements: Sequence[Element], tail: str | Segments = "") -> str:
        return "".join(text for text, _ in self.segments(elements, tail))

    def measure(self, elements: Sequence[Element], tail: str | Segments = "") -> tuple[str, int]:
        """The memory text and its exact count (stored counts of raw texts reused)."""
        segments = self.segments(elements, tail)
        return "".join(text for text, _ in segments), count_concat(self.tokenizer, segments)

    def segments(self, elements: Sequence[Element], tail: str | Segments = "") -> list[tuple[str, int | None]]:
        """The memory text as lines joined by newlines, a recovered element's line in its parts."""
        by_item: dict[int, list[Element]] = {}
        for e in elements:
            item = self.timeline.item_at(e.pos)
            by_item.setdefault(item.start if item is not None else -1, []).append(e)
        for group in by_item.values():
            group.sort(key=lambda e: (e.pos, e.rank))
        lines: list[str | Element | Segments] = [MEMORY_OPEN, MEMORY_INTRO]
        later: list[Element] = []
        if self.timeline.hidden_until:
            lines.append(f"- [{self.timeline.hidden_until} earlier units not shown in this call]")
            hidden = by_item.get(-1, [])  # recovered units whose records are hidden this call
            if self.detail_after:
                later.extend(hidden)
            else:
                lines.extend(hidden)
        for item in self.timeline.items:
            here = by_item.get(item.start, ())
            in_place = [e for e in here if e.in_place]
            if in_place:
                lines.extend(in_place)
            else:
                lines.append(item.line)
            after = [e for e in here if not e.in_place]
            if self.detail_after:
                later.extend(after)
            else:
                lines.extend(after)
        lines.extend(sorted(later, key=lambda e: (e.pos, e.rank)))
        if tail:
            lines.append(tail)
        lines.append(MEMORY_CLOSE)
        out: list[tuple[str, int | None]] = []
        for k, line in enumerate(lines):
            if k:
                out.append(("\n", None))
            if isinstance(line, Element):
                out.extend(line.segments())
            elif isinstance(line, tuple):
                out.extend(line)
            else:
                out.append((line, None))
        return out


def shrink(assembler: Assembler, elements: list[Element], allowance: int, tail_fn: Any = None
           ) -> tuple[str, int, list[Element]]:
    """Drop the lowest-ranked element while the memory exceeds the allowance."""
    elements = sorted(elements, key=lambda e: e.rank)
    while True:
        tail = tail_fn(elements) if tail_fn else ""
        text, n = assembler.measure(elements, tail)
        if n <= allowance or not elements:
            return text, n, elements
        elements = elements[:-1]


def fit_or_degrade(notes: Sequence[Note], cands: Sequence[Candidate], room: int, index: NamespaceIndex,
                   cfg: FlexAMemConfig, tokenizer: Tokenizer, excerpt_scores: np.ndarray,
                   credit_of: Callable[[int], int | None]) -> list[Element]:
    """Each candidate, in rank order, at the highest resolution that fits the room left:
    raw text, else an excerpt of its BM25-best pieces, else nothing (it stays a record).

    ``credit_of(pos)`` is None for a unit not shown this call, else the tokens of the
    record its text replaces in place (0: the text is shown next to the record).
    """
    store, ns = index.store, index.namespace
    elements: list[Element] = []
    for rank, cand in enumerate(cands):
        credit = credit_of(cand.pos)
        if credit is None:
            continue
        in_place = credit > 0
        note = notes[cand.pos]
        header = f"- [{note.label}] (raw)"
        raw_cost = tokenizer.count(header) + 1 + note.raw_tokens + 1 - credit
        if raw_cost <= room:
            raw = store.get_unit(ns, note.unit_key).raw
            parts = ((f"{header}\n", None), (raw, stored_raw_tokens(note, tokenizer)))
            elements.append(Element(cand.pos, rank, "raw", f"{header}\n{raw}", raw_cost + credit, in_place, parts))
            room -= raw_cost
            continue
        if not cfg.excerpts:
            continue
        docs = index.unit_docs.get(note.unit_key, range(0))
        chosen = best_pieces(docs, excerpt_scores, index, cfg.excerpt_tokens)
        if not chosen:
            continue
        plist = store.pieces(ns, note.unit_key)
        kept = [plist[index.doc_piece[d]] for d in chosen]
        head = f"- [{note.label}] {note.record}\n(excerpt)"
        # Estimated from stored piece counts (no re-tokenizing); the caller checks exactly.
        exc_cost = tokenizer.count(head) + 1 + _joined_estimate(kept, len(plist), tokenizer) + 1 - credit
        if exc_cost <= room:
            joined = verbatim_join(kept, plist, lambda k=note.unit_key: store.get_unit(ns, k).raw)
            exc_text = f"{head}\n{joined}"
            elements.append(Element(cand.pos, rank, "excerpt", exc_text, exc_cost + credit, in_place))
            room -= exc_cost
    return elements


def unit_recovery(notes: Sequence[Note], timeline: Timeline, cands: Sequence[Candidate], room: int,
                  allowance: int, index: NamespaceIndex, cfg: FlexAMemConfig, tokenizer: Tokenizer,
                  excerpt_scores: np.ndarray, in_place_detail: bool = True) -> MemoryRender:
    """Fit-or-degrade over the candidates, then the final shrink loop.

    ``in_place_detail=False`` shows recovered units after the whole timeline (in time
    order) instead of in place of their records, so the timeline stays a stable prefix of
    the memory text from one render to the next (the prompt-cache-stable layout).
    """
    def credit_of(pos: int) -> int | None:
        item = timeline.item_at(pos)
        if item is None:
            return 0  # its record is hidden this call: the text goes after the mark
        return item.tokens if item.level == 0 and in_place_detail else 0

    elements = fit_or_degrade(notes, cands if cfg.recovery else (), room, index, cfg, tokenizer,
                              excerpt_scores, credit_of)
    assembler = Assembler(timeline, tokenizer, detail_after=not in_place_detail)
    text, n, kept = shrink(assembler, elements, allowance)
    spent = {"timeline": timeline.total
             - sum(timeline.item_at(e.pos).tokens for e in kept if e.in_place),  # type: ignore[union-attr]
             "raw": sum(e.tokens for e in kept if e.resolution == "raw"),
             "excerpt": sum(e.tokens for e in kept if e.resolution == "excerpt"), "pieces": 0}
    runs = timeline_runs(timeline)
    rows = unit_rows(notes, runs, {e.pos: e.resolution for e in kept}, {c.pos: (c.why, c.score) for c in cands})
    return MemoryRender(text, n, spent, rows, unit_runs=runs, dropped=len(elements) - len(kept))


def old_docs(notes: Sequence[Note], index: NamespaceIndex) -> np.ndarray:
    """The piece documents of the old units, ascending (a chain's positions only increase)."""
    if notes and index.is_prefix(notes[0].unit_key, notes[-1].unit_key, len(notes)):
        # The usual case: the old units are the first notes written, so their docs are a prefix.
        last = index.unit_docs.get(notes[-1].unit_key)
        return np.arange(last.stop if last is not None else 0, dtype=np.int64)
    ranges = [index.unit_docs.get(nt.unit_key, range(0)) for nt in notes]
    docs = [np.arange(r.start, r.stop, dtype=np.int64) for r in ranges if len(r)]
    return np.concatenate(docs) if docs else np.zeros(0, dtype=np.int64)


def piece_recovery(notes: Sequence[Note], timeline: Timeline, query_text: str, q_vec: np.ndarray,
                   room: int, allowance: int, index: NamespaceIndex, tokenizer: Tokenizer,
                   cfg: FlexAMemConfig | None = None, first: Sequence[int] = ()) -> MemoryRender:
    """The best pieces of all old units that fit, shown after the timeline.

    ``first``: piece documents taken before the ranked ones, in order, while they fit, with
    their framing counted (``mode="auto"``: all pieces of a unit, i.e. the unit whole, or of
    whole turns).

    Pieces are ranked by BM25 and by the cosine of their stored vectors with the query,
    fused (``fusion``; ``cfg=None`` is the default config): a render never calls the
    embedding model for pieces. Chosen pieces are shown in time order, one header per run
    of units with the same label (a conversation's date, an agent's steps).
    """
    cfg = cfg or FlexAMemConfig()
    store, ns = index.store, index.namespace
    bm25 = index.bm25.scores(index.bm25.query_terms(query_text, cfg.query_terms))
    old = old_docs(notes, index)
    ranking: Ranking = DenseRanking(old[bm25[old] > 0], bm25) if cfg.fusion == "bm25" \
        else fused_ranking(old, bm25, q_vec, index, cfg)
    tokens = index.doc_tokens_array()
    pos_of = positions(notes, index)
    cache: dict[str, list[Piece]] = {}

    def pieces_of(key: str) -> list[Piece]:
        if key not in cache:
            cache[key] = store.pieces(ns, key)
        return cache[key]

    framing = _Framing(index, notes, pos_of, tokenizer, pieces_of)
    forced: list[int] = []
    for d in first:
        cost = int(tokens[d]) + framing.cost(d)
        if cost > room:
            break  # what is taken stays one contiguous run
        forced.append(d)
        room -= cost
        framing.take(d, cost)
    if forced:
        ranking = ranking.without(forced)
    chosen = forced + select_pieces(ranking, tokens, room, lambda run: index.piece_cosines(run, q_vec), framing)
    raws: dict[str, str] = {}

    def raw_of(key: str) -> str:
        if key not in raws:
            raws[key] = store.get_unit(ns, key).raw
        return raws[key]

    def tail(kept: Sequence[Element]) -> Segments:
        """The pieces' lines, a whole unit's text with its stored count (see :class:`Element`)."""
        if not kept:
            return ()
        by_unit: dict[int, list[int]] = {}
        for e in kept:
            by_unit.setdefault(e.pos, []).append(int(e.text))
        out: list[list[tuple[str, int | None]]] = [[(PIECES_HEADER, None)]]
        label, prev, prev_ends = None, -2, False
        for pos in sorted(by_unit):
            note = notes[pos]
            key = note.unit_key
            plist = pieces_of(key)
            ps = sorted((plist[index.doc_piece[d]] for d in by_unit[pos]), key=lambda p: p.index)
            joined = verbatim_join(ps, plist, lambda k=key: raw_of(k))
            if note.label != label:
                label = note.label
                out.append([(group_header(label), None)])
            elif out[-1][-1][0].endswith("\n...") and joined.startswith("..."):
                joined = joined[4:]  # one mark between two units of one group, not two
            elif prev_ends and ps[0].index == 0:
                # the previous unit's text runs to its end and this one's from its start: the
                # turns meet as in the conversation (a blank line) if the units are neighbours,
                # else the units between them are left out, and marked
                if pos == prev + 1:
                    out[-1].append(("\n", None))
                else:
                    out.append([("...", None)])
            whole = len(ps) == len(plist) and raws.get(key) == joined
            out.append([(joined, stored_raw_tokens(note, tokenizer) if whole else None)])
            prev, prev_ends = pos, ps[-1].index == len(plist) - 1
        return tuple(segment for k, line in enumerate(out) for segment in ([("\n", None)] if k else []) + line)

    # Elements carry the doc number in ``text``; the tail renders them grouped by unit.
    elements = [Element(pos_of[index.doc_unit[d]], rank, "piece", str(d), int(tokens[d]), False)
                for rank, d in enumerate(chosen)]
    assembler = _PieceAssembler(timeline, tokenizer)
    text, n, kept = shrink(assembler, elements, allowance, tail)
    if len(kept) == len(chosen) and allowance - n > 0:
        # The framing estimate is an upper bound (a later neighbour joins a run): fill the
        # room it left, counted exactly this time, with the next best pieces.
        more = select_pieces(ranking.without(chosen), tokens,
                             allowance - n, lambda run: index.piece_cosines(run, q_vec), framing)
        if more:
            elements += [Element(pos_of[index.doc_unit[d]], len(chosen) + r, "piece", str(d), int(tokens[d]), False)
                         for r, d in enumerate(more)]
            chosen = [*chosen, *more]
            text, n, kept = shrink(assembler, elements, allowance, tail)
    spent = {"timeline": timeline.total, "raw": 0, "excerpt": 0, "pieces": max(0, n - timeline.total)}
    kept_scores = ranking.score([int(e.text) for e in kept]) if kept else np.zeros(0)
    pieces = [{"unit": notes[e.pos].unit_key, "piece": index.doc_piece[int(e.text)],
               "score": round(float(score), 6), "bm25": round(float(bm25[int(e.text)]), 4),
               "rank": e.rank} for e, score in zip(kept, kept_scores)]
    counts: dict[int, int] = {}
    for e in kept:
        counts[e.pos] = counts.get(e.pos, 0) + 1
    runs = timeline_runs(timeline)
    return MemoryRender(text, n, spent, unit_rows(notes, runs, {}, {}, counts), pieces, unit_runs=runs,
                        dropped=len(chosen) - len(kept), charged=framing.charged)


def group_header(label: str) -> str:
    """The line that opens the recovered pieces of a run of units sharing ``label``."""
    return f"== [{label}] =="


class _Framing:
    """What a chosen piece costs beyond its own tokens, counted before choosing it: the
    newline that joins it (or the '...' line before a run that does not open its unit: one
    token with its newlines), and where it starts a run inside a turn or block, its label;
    for the first piece of a unit, the '...' after its unit's text and, if no unit with its
    label is shown yet, its group header; for the first piece of all, the pieces header.

    An upper bound in practice: a later piece that joins two runs saves a mark and a label
    it is not refunded (the exact count after choosing gives that room to the next pieces)."""

    def __init__(self, index: NamespaceIndex, notes: Sequence[Note], pos_of: Mapping[str, int],
                 tokenizer: Tokenizer, pieces_of: Callable[[str], list[Piece]] | None = None) -> None:
        self.index, self.notes, self.pos_of, self.tokenizer = index, notes, pos_of, tokenizer
        self.pieces_of = pieces_of
        self.taken: set[int] = set()
        self.units: set[str] = set()
        self.labels: set[str] = set()
        self.opening = tokenizer.count(PIECES_HEADER) + 1
        self._counts: dict[str, int] = {}
        #: What the pieces taken were charged in all (their tokens and framing).
        self.charged = 0

    def _count(self, text: str) -> int:
        if text not in self._counts:
            self._counts[text] = self.tokenizer.count(text)
        return self._counts[text]

    def cost(self, d: int) -> int:
        index = self.index
        unit = index.doc_unit[d]
        joined = d - 1 in self.taken and index.doc_unit[d - 1] == unit
        # The newline (or what separated it in the raw text) before it; for a run that does
        # not open its unit, the '...' line before it: '\n...\n' is one token.
        extra = 1
        if not joined:
            piece_no = index.doc_piece[d]
            if self.pieces_of is not None:
                piece = self.pieces_of(unit)[piece_no]
                if not piece.starts_block:
                    extra += self._count(f"[{piece.label}] ")
        if unit not in self.units:
            extra += 1  # the '...' line after its unit's text, if its end is left out
            label = self.notes[self.pos_of[unit]].label
            if label not in self.labels:
                extra += self._count(group_header(label)) + 1
        return extra + (self.opening if not self.taken else 0)

    def take(self, d: int, charged: int = 0) -> None:
        self.taken.add(d)
        self.charged += charged
        unit = self.index.doc_unit[d]
        self.units.add(unit)
        self.labels.add(self.notes[self.pos_of[unit]].label)


class _PieceAssembler(Assembler):
    """Piece elements never replace records: they are rendered by the tail only."""

    def segments(self, elements: Sequence[Element], tail: str | Segments = "") -> list[tuple[str, int | None]]:
        return super().segments((), tail)


#: Pieces in a row that fit by their own size but not with their framing before the walk
#: of :func:`select_pieces` stops.
MAX_MISSES = 64


def select_pieces(ranking: Ranking, tokens: Sequence[int] | np.ndarray, room: int,
                  cosine: Callable[[list[int]], np.ndarray], framing: _Framing | None = None) -> list[int]:
    """Pieces in ``ranking``'s order (BM25 or fused), taken greedily while they fit ``room``
    (with ``framing``: what each costs to show, marks and headers included, so the memory
    seldom has to drop one).

    Ties go to ``cosine`` with the query (stored vectors, no model call), then to the
    earlier piece; only a run of equal scores that does not fit whole needs that order (a
    run taken whole is shown in time order anyway). The walk stops as soon as the room
    left is smaller than every piece, or when ``MAX_MISSES`` pieces in a row small enough
    to fit did not fit with their framing: the room left is then less than a new run's
    label and header cost, and with every old piece a candidate (RRF), pricing the rest of
    160,000 pieces took up to 1.8 s of a render at 13,333 units.
    """
    chosen: list[int] = []
    if len(ranking) == 0 or room <= 0:
        return chosen
    # Only the best pieces can fit: sort the top ones (all pieces tied with the last of
    # them included), and widen only if the room is not used up by them.
    tokens_of = np.asarray(tokens)
    smallest = max(1, ranking.smallest(tokens_of))
    # Every piece shown costs at least its tokens and the newline before it: a piece that
    # cannot fit even so is passed over without pricing its marks (with RRF every old piece
    # is a candidate, and pricing them all once the room is nearly used took seconds).
    least = 1 if framing is not None else 0
    order = ranking.best(4 * (room // smallest + 1))
    runs = _Runs(order, ranking.score(order), tokens_of)
    i = misses = 0
    while room >= smallest + least and misses < MAX_MISSES:
        # the next run of equal scores holding a piece that could fit (found in C: once the
        # room is nearly used, most candidates are passed over here, none of them priced)
        nxt = runs.next_fitting(i, room - least)
        if nxt is None:
            if len(order) >= len(ranking):
                break
            # ties at the cut are all included, so the longer order starts with this one and
            # its runs: go on after it (no piece of it could fit the room there is now)
            i = len(order)
            order = ranking.best(8 * len(order))
            runs = _Runs(order, ranking.score(order), tokens_of)
            continue
        i, j = nxt
        run = order[i:j].tolist()
        if len(run) > 1 and int(tokens_of[order[i:j]].sum()) > room:
            cos = cosine(run)
            run = [d for _, d in sorted(zip((-cos).tolist(), run))]
        for d in run:
            size = int(tokens_of[d])
            if size + least > room:
                continue
            cost = size + (framing.cost(d) if framing is not None else 0)
            if cost > room:
                misses += 1
                if misses >= MAX_MISSES:
                    break
                continue
            misses = 0
            chosen.append(d)
            room -= cost
            if framing is not None:
                framing.take(d, cost)
        i = j
    return chosen


class _Runs:
    """The runs of equal scores of a best-first order, with the smallest piece of each."""

    def __init__(self, order: np.ndarray, values: np.ndarray, tokens: np.ndarray) -> None:
        """``values``: the scores of ``order``, in its order."""
        arr = np.asarray(order, dtype=np.int64)
        self.n = len(arr)
        if self.n == 0:
            self.starts = self.stops = self.smallest = np.zeros(0, dtype=np.int64)
            return
        self.starts = np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1)).astype(np.int64)
        self.stops = np.append(self.starts[1:], self.n)
        self.smallest = np.minimum.reduceat(tokens[arr], self.starts)

    def next_fitting(self, i: int, fits: int) -> tuple[int, int] | None:
        """The first run starting at ``i`` or later whose smallest piece is at most ``fits``
        tokens, as (start, stop); None if there is none in this order."""
        r = int(np.searchsorted(self.starts, i))
        ok = np.flatnonzero(self.smallest[r:] <= fits)
        if len(ok) == 0:
            return None
        r += int(ok[0])
        return int(self.starts[r]), int(self.stops[r])
