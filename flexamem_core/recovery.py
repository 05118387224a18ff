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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .bm25 import content_words
from .config import FlexAMemConfig
from .index import NamespaceIndex
from .protocols import Embedder, Tokenizer
from .schema import Note, Piece
from .timeline import Timeline, TimelineItem

MEMORY_OPEN = "<memory>"
MEMORY_CLOSE = "</memory>"
MEMORY_INTRO = ("Earlier history, oldest first: one record per unit; entries marked raw, excerpt "
                "or piece are verbatim text of that history.")
#: At most this many pieces of one run of equal BM25 scores are ordered by cosine.
TIE_CAP = 256
PIECES_HEADER = "Recovered pieces (verbatim, grouped by unit in time order; ... marks omitted text):"


@dataclass
class Candidate:
    """A unit that unit recovery visits, with its score g and why it was reached."""

    pos: int
    score: float
    why: str


@dataclass
class Element:
    """Recovered text for one unit (or the pieces of one unit) placed into the timeline."""

    pos: int
    rank: int
    resolution: str
    text: str
    tokens: int
    in_place: bool


@dataclass
class MemoryRender:
    text: str
    tokens: int
    spent: dict[str, int]
    units: list[dict[str, Any]] = field(default_factory=list)
    pieces: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: int = 0


class _Prefix:
    """Key -> position for old units that are exactly the first ``n`` notes of the index."""

    def __init__(self, position: dict[str, int], n: int) -> None:
        self.position = position
        self.n = n

    def __contains__(self, key: object) -> bool:
        return self.position.get(key, self.n) < self.n  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> int:
        return self.position[key]


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
    if index.position.get(notes[0].unit_key) == 0 and index.position.get(notes[-1].unit_key) == n - 1:
        # The usual case: the old units are the first n notes written (positions only increase).
        cos = index.vectors[:n] @ q_vec
        pos_of: dict[str, int] | _Prefix = _Prefix(index.position, n)
    else:
        rows = np.fromiter((index.position[nt.unit_key] for nt in notes), dtype=np.int64, count=n)
        cos = index.vectors[rows] @ q_vec
        pos_of = {nt.unit_key: p for p, nt in enumerate(notes)}
    seeds = np.lexsort((np.arange(n), -cos))[: cfg.seeds]
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


def omission_join(pieces: Sequence[Piece], total: int) -> str:
    """Pieces in order, each out-of-context piece labelled, '...' where text was left out."""
    out: list[str] = []
    prev = -1
    for p in pieces:
        if p.index != prev + 1:
            out.append("...")
        out.append(p.text if p.starts_block else f"[{p.label}] {p.text}")
        prev = p.index
    if pieces and prev != total - 1:
        out.append("...")
    return "\n".join(out)


def _joined_estimate(pieces: Sequence[Piece], total: int, tokenizer: Tokenizer) -> int:
    """Token estimate of :func:`omission_join` from the pieces' stored counts."""
    marks = sum(1 for a, b in zip([-1, *[p.index for p in pieces]], [p.index for p in pieces]) if b != a + 1)
    marks += 1 if pieces and pieces[-1].index != total - 1 else 0
    labels = sum(tokenizer.count(f"[{p.label}] ") for p in pieces if not p.starts_block)
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


class Assembler:
    """Joins the timeline and recovered elements into the memory text, and counts it."""

    def __init__(self, timeline: Timeline, tokenizer: Tokenizer) -> None:
        self.timeline = timeline
        self.tokenizer = tokenizer

    def text(self, elements: Sequence[Element], tail: str = "") -> str:
        by_pos: dict[int, list[Element]] = {}
        for e in elements:
            by_pos.setdefault(e.pos, []).append(e)
        lines = [MEMORY_OPEN, MEMORY_INTRO]
        if self.timeline.hidden_until:
            lines.append(f"- [{self.timeline.hidden_until} earlier units not shown in this call]")
        for item in self.timeline.items:
            in_place = [e for p in range(item.start, item.end) for e in by_pos.get(p, ()) if e.in_place]
            if in_place:
                lines.extend(e.text for e in in_place)
            else:
                lines.append(item.line)
            after = [e for p in range(item.start, item.end) for e in by_pos.get(p, ()) if not e.in_place]
            lines.extend(e.text for e in after)
        if tail:
            lines.append(tail)
        lines.append(MEMORY_CLOSE)
        return "\n".join(lines)

    def count(self, text: str) -> int:
        return self.tokenizer.count(text)


def shrink(assembler: Assembler, elements: list[Element], allowance: int, tail_fn: Any = None
           ) -> tuple[str, int, list[Element]]:
    """Drop the lowest-ranked element while the memory exceeds the allowance."""
    elements = sorted(elements, key=lambda e: e.rank)
    while True:
        tail = tail_fn(elements) if tail_fn else ""
        text = assembler.text(elements, tail)
        n = assembler.count(text)
        if n <= allowance or not elements:
            return text, n, elements
        elements = elements[:-1]


def unit_recovery(notes: Sequence[Note], timeline: Timeline, cands: Sequence[Candidate], room: int,
                  allowance: int, index: NamespaceIndex, cfg: FlexAMemConfig, tokenizer: Tokenizer,
                  excerpt_scores: np.ndarray) -> MemoryRender:
    """Fit-or-degrade over the candidates, then the final shrink loop."""
    store, ns = index.store, index.namespace
    shown = timeline.item_of()
    elements: list[Element] = []
    why = {c.pos: c for c in cands}
    for rank, cand in enumerate(cands if cfg.recovery else ()):
        item = shown.get(cand.pos)
        if item is None:
            continue  # hidden this call
        note = notes[cand.pos]
        in_place = item.level == 0
        credit = item.tokens if in_place else 0
        header = f"- [{note.label}] (raw)"
        raw_cost = tokenizer.count(header) + 1 + note.raw_tokens + 1 - credit
        if raw_cost <= room:
            raw_text = f"{header}\n{store.get_unit(ns, note.unit_key).raw}"
            elements.append(Element(cand.pos, rank, "raw", raw_text, raw_cost + credit, in_place))
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
        # Estimated from stored piece counts (no re-tokenizing); the final shrink loop checks exactly.
        exc_cost = tokenizer.count(head) + 1 + _joined_estimate(kept, len(plist), tokenizer) + 1 - credit
        if exc_cost <= room:
            exc_text = f"{head}\n{omission_join(kept, len(plist))}"
            elements.append(Element(cand.pos, rank, "excerpt", exc_text, exc_cost + credit, in_place))
            room -= exc_cost
    assembler = Assembler(timeline, tokenizer)
    text, n, kept = shrink(assembler, elements, allowance)
    kept_by_pos = {e.pos: e for e in kept}
    spent = {"timeline": sum(it.tokens for it in timeline.items)
             - sum(shown[e.pos].tokens for e in kept if e.in_place),
             "raw": sum(e.tokens for e in kept if e.resolution == "raw"),
             "excerpt": sum(e.tokens for e in kept if e.resolution == "excerpt"), "pieces": 0}
    return MemoryRender(text, n, spent, _unit_reports(notes, timeline, kept_by_pos, why))


def piece_recovery(notes: Sequence[Note], timeline: Timeline, query_text: str, q_vec: np.ndarray,
                   room: int, allowance: int, index: NamespaceIndex, tokenizer: Tokenizer,
                   embedder: Embedder) -> MemoryRender:
    """The best BM25 pieces of all old units that fit, shown after the timeline."""
    store, ns = index.store, index.namespace
    scores = index.bm25.scores(content_words(query_text))
    allowed = np.zeros(len(scores), dtype=bool)
    for nt in notes:
        r = index.unit_docs.get(nt.unit_key)
        if r is not None and len(r):
            allowed[r.start:r.stop] = True
    hits = np.flatnonzero((scores > 0) & allowed)
    tokens = index.doc_tokens_array()
    chosen = select_pieces(hits, scores, tokens, room,
                           lambda run: np.stack([v for v in index.piece_embeddings(run, embedder).values()]) @ q_vec)
    pos_of = {nt.unit_key: p for p, nt in enumerate(notes)}
    cache: dict[str, list[Piece]] = {}

    def tail(kept: Sequence[Element]) -> str:
        if not kept:
            return ""
        by_unit: dict[int, list[int]] = {}
        for e in kept:
            by_unit.setdefault(e.pos, []).append(int(e.text))
        out = [PIECES_HEADER]
        for pos in sorted(by_unit):
            key = notes[pos].unit_key
            plist = cache.setdefault(key, store.pieces(ns, key))
            ps = sorted((plist[index.doc_piece[d]] for d in by_unit[pos]), key=lambda p: p.index)
            out.append(f"== [{notes[pos].label}] ==")
            out.append(omission_join(ps, len(plist)))
        return "\n".join(out)

    # Elements carry the doc number in ``text``; the tail renders them grouped by unit.
    elements = [Element(pos_of[index.doc_unit[d]], rank, "piece", str(d), int(tokens[d]), False)
                for rank, d in enumerate(chosen)]
    assembler = _PieceAssembler(timeline, tokenizer)
    text, n, kept = shrink(assembler, elements, allowance, tail)
    spent = {"timeline": sum(it.tokens for it in timeline.items), "raw": 0, "excerpt": 0,
             "pieces": max(0, n - sum(it.tokens for it in timeline.items))}
    pieces = [{"unit": notes[e.pos].unit_key, "piece": index.doc_piece[int(e.text)],
               "score": round(float(scores[int(e.text)]), 4), "rank": e.rank} for e in kept]
    counts: dict[int, int] = {}
    for e in kept:
        counts[e.pos] = counts.get(e.pos, 0) + 1
    reports = _unit_reports(notes, timeline, {}, {})
    for r in reports:
        r["pieces"] = counts.get(r["position"], 0)
    return MemoryRender(text, n, spent, reports, pieces)


class _PieceAssembler(Assembler):
    """Piece elements never replace records: they are rendered by the tail only."""

    def text(self, elements: Sequence[Element], tail: str = "") -> str:
        return super().text((), tail)


def select_pieces(hits: Sequence[int] | np.ndarray, scores: np.ndarray, tokens: Sequence[int] | np.ndarray,
                  room: int, cosine: Callable[[list[int]], np.ndarray]) -> list[int]:
    """Pieces in BM25 rank order, taken greedily while they fit ``room``.

    Ties go to cosine with the query, then to the earlier piece. Only a run of equal
    scores that does not fit whole needs the cosine order (a run taken whole is shown in
    time order anyway), so pieces are embedded for that one run, not for every tie.
    """
    hits = np.asarray(hits, dtype=np.int64)
    order = [int(d) for d in hits[np.lexsort((hits, -scores[hits]))]]
    chosen: list[int] = []
    i = 0
    while i < len(order) and room > 0:
        j = i + 1
        while j < len(order) and scores[order[j]] == scores[order[i]]:
            j += 1
        run = order[i:j]
        if len(run) > 1 and sum(int(tokens[d]) for d in run) > room:
            # Order the earliest TIE_CAP tied pieces by cosine (the rest stay in time order), so a
            # huge tie in a repetitive history cannot make one render embed thousands of pieces.
            head, rest = run[:TIE_CAP], run[TIE_CAP:]
            cos = cosine(head)
            run = [d for _, d in sorted(zip((-cos).tolist(), head))] + rest
        for d in run:
            if int(tokens[d]) <= room:
                chosen.append(d)
                room -= int(tokens[d])
        i = j
    return chosen


def _unit_reports(notes: Sequence[Note], timeline: Timeline, kept: dict[int, Element],
                  why: dict[int, Candidate]) -> list[dict[str, Any]]:
    shown: dict[int, TimelineItem] = timeline.item_of()
    out = []
    for pos, note in enumerate(notes):
        item = shown.get(pos)
        if pos in kept:
            res = kept[pos].resolution
        elif item is None:
            res = "hidden"
        else:
            res = "record" if item.level == 0 else "merged"
        row: dict[str, Any] = {"position": pos, "unit": note.unit_key, "label": note.label, "resolution": res}
        if pos in why:
            row["why"] = why[pos].why
            row["score"] = round(why[pos].score, 4)
        out.append(row)
    return out
