"""PaMER (section 4 of the PaMER paper) and PaMER+, without an LLM or hidden states.

Structure kept: the prefix (system and task, or the question) and the two most recent
complete interaction blocks (an assistant message and everything up to the next one) stay
raw; older blocks, once they total at least 1,024 tokens, are compressed into one stored
summary, with links to the blocks it covers, and leave the context. The request that
compresses gets no recall; later requests retrieve the top 3 summaries by cosine with the
task and the two recent blocks (last 30,000 characters) and insert them after the prefix.
PaMER+ then restores the raw blocks the selected summaries cover, best match first, while
they fit.

Changed, and said so in the report: the learned trigger (five probe heads on the hidden
state) is replaced by the token threshold, applied when the context would exceed B_bar;
summaries are written by the core's rule writer (no LLM); PaMER+'s LLM selector of
``raw_steps_needed`` is replaced by cosine ranking of the covered blocks. To stay within
the same budget, the lowest-ranked summaries and then the oldest unarchived blocks are
dropped when the context still exceeds B_bar, and the core cuts the newest outputs last.
Reader histories are archived the same way, chunk by chunk, before the question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flexamem_core import Message
from flexamem_core.model.schema import Unit
from flexamem_core.request.cuts import fit_messages
from flexamem_core.write.units import agent_blocks, reader_blocks, split_steps
from flexamem_core.write.writers import RuleRecordWriter

from ..items import Question
from .base import Env, Method, WriteCost, memory_message, split_prefix, warm_embedder

TRIGGER_TOKENS = 1024
RECENT_BLOCKS = 2
TOP_K = 3
QUERY_CHARS = 30_000
SUMMARY_WORDS = 150


@dataclass
class Summary:
    text: str
    vector: np.ndarray
    blocks: range


@dataclass
class _State:
    """Per-budget memory of one run: stored summaries and how many blocks are archived."""

    summaries: list[Summary] = field(default_factory=list)
    archived: int = 0


class PaMER(Method):
    """Prefix + retrieved summaries + unarchived blocks + two recent blocks."""

    name = "pamer"
    @classmethod
    def warm(cls, env: Env) -> None:
        warm_embedder(env)

    restore = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.writer = RuleRecordWriter(SUMMARY_WORDS)
        self.states: dict[int, _State] = {}
        self._block_vectors: dict[int, np.ndarray] = {}
        # PaMER and PaMER+ write the same summaries: the first of them to run reports the cost for
        # both (every instance of that one, e.g. one per budget, adds to it).
        self._owner = self.shared.setdefault("pamer_owner", self.name) == self.name
        self.cost = self.shared.setdefault("pamer_cost", WriteCost())

    # ---------------------------------------------------------------- blocks
    def _tokens(self, block: Sequence[Message]) -> int:
        return self.env.count(block)

    def _summarize(self, blocks: Sequence[Sequence[Message]], kind: str, first: int, last: int) -> Summary:
        return self._summarize_all([(blocks, first, last)], kind)[0]

    def _summarize_all(self, spans: Sequence[tuple[Sequence[Sequence[Message]], int, int]],
                       kind: str) -> list[Summary]:
        """One summary per span of blocks (``first``, ``last``), embedded in one batched call
        (a reader's archive is written at once; one call per summary would be most of its cost)."""
        import time

        t0 = time.perf_counter()
        texts = []
        for blocks, first, last in spans:
            messages = [m for b in blocks for m in b]
            parts = agent_blocks(messages, first + 1)[0] if kind == "agent" else reader_blocks(messages)
            raw = "\n\n".join(p.text for p in parts)
            unit = Unit(key=f"pamer-{first}-{last}", kind=kind, messages=tuple(messages),  # type: ignore[arg-type]
                        raw=raw, tokens=self.env.tokenizer.count(raw), parent=None, first_step=first + 1)
            texts.append(self.writer.write(unit).record)
        vectors = self.env.embedder.embed(texts) if texts else []
        if self._owner:
            self.cost.ms += (time.perf_counter() - t0) * 1000
            self.cost.units += len(texts)
        return [Summary(text, vector, range(first, last)) for text, vector, (_, first, last)
                in zip(texts, vectors, spans)]

    def _query(self, prefix: Sequence[Message], recent: Sequence[Sequence[Message]]) -> np.ndarray:
        text = "\n".join([*(m.text for m in prefix), *(m.text for b in recent for m in b)])
        return self.env.embedder.embed([text[-QUERY_CHARS:]])[0]

    def _block_vector(self, i: int, block: Sequence[Message]) -> np.ndarray:
        if i not in self._block_vectors:
            self._block_vectors[i] = self.env.embedder.embed(["\n".join(m.text for m in block)])[0]
        return self._block_vectors[i]

    # ---------------------------------------------------------------- assembly
    def _assemble(self, prefix: list[Message], after: list[Message], blocks: Sequence[Sequence[Message]],
                  state: _State, selected: list[Summary], q_vec: np.ndarray | None, limit: int,
                  tail: list[Message]) -> list[Message]:
        """Fit ``prefix + memory + unarchived blocks + recent blocks (+ tail)`` within ``limit``."""
        unarchived = [m for b in blocks[state.archived: len(blocks) - RECENT_BLOCKS] for m in b] \
            if len(blocks) > RECENT_BLOCKS else []
        recent = [m for b in blocks[max(state.archived, len(blocks) - RECENT_BLOCKS):] for m in b]
        restored: list[int] = []
        if self.restore and selected and q_vec is not None:
            covered = [i for s in selected for i in s.blocks]
            covered.sort(key=lambda i: (-float(self._block_vector(i, blocks[i]) @ q_vec), i))
            restored = covered

        def build(n_summaries: int, n_restored: int, drop_old: int) -> list[Message]:
            parts = [s.text for s in selected[:n_summaries]]
            keep = sorted(restored[:n_restored])
            parts += ["\n".join(f"{m.role}: {m.text}" for m in blocks[i]) for i in keep]
            memory = [memory_message("Memory summaries:\n" + "\n\n".join(parts))] if parts else []
            return [*prefix, *memory, *unarchived_from(drop_old), *recent, *after, *tail]

        def unarchived_from(drop: int) -> list[Message]:
            if not drop:
                return unarchived
            rest = blocks[state.archived + drop: len(blocks) - RECENT_BLOCKS]
            return [m for b in rest for m in b]

        n_rest = 0
        for n in range(len(restored) + 1):  # PaMER+: restore while they fit
            if self.env.count(build(len(selected), n, 0)) > limit:
                break
            n_rest = n
        for n_sum in range(len(selected), -1, -1):
            context = build(n_sum, n_rest if n_sum == len(selected) else 0, 0)
            if self.env.count(context) <= limit:
                return context
        old = max(0, len(blocks) - RECENT_BLOCKS - state.archived)
        for drop in range(1, old + 1):
            context = build(0, 0, drop)
            if self.env.count(context) <= limit:
                return context
        fixed = self.env.count([*prefix, *after, *tail])
        cut, _ = fit_messages(recent, max(1, limit - fixed - 3), self.env.tokenizer)
        return [*prefix, *cut, *after, *tail]

    def _select(self, state: _State, q_vec: np.ndarray) -> list[Summary]:
        if not state.summaries:
            return []
        cos = np.stack([s.vector for s in state.summaries]) @ q_vec
        order = np.lexsort((np.arange(len(cos)), -cos))[:TOP_K]
        return [state.summaries[i] for i in order.tolist()]

    # ---------------------------------------------------------------- agents
    def fit_step(self, history: Sequence[Message], budget: int, limit: int) -> list[Message]:
        prefix, rest = split_prefix(history)
        blocks = split_steps(rest)
        state = self.states.setdefault(budget, _State())
        candidate_end = len(blocks) - RECENT_BLOCKS
        candidate = blocks[state.archived: candidate_end] if candidate_end > state.archived else []
        recent = blocks[max(state.archived, candidate_end):]
        q_vec = None
        selected: list[Summary] = []
        current = [*prefix, *(m for b in blocks[state.archived:] for m in b)]
        candidate_tokens = sum(self._tokens(b) for b in candidate)
        if self.env.count(current) > limit and candidate_tokens >= TRIGGER_TOKENS:
            state.summaries.append(self._summarize(candidate, "agent", state.archived, candidate_end))
            state.archived = candidate_end  # this request: no recall
        elif state.summaries:
            q_vec = self._query(prefix, recent)
            selected = self._select(state, q_vec)
        return self._assemble(prefix, [], blocks, state, selected, q_vec, limit, [])

    # ---------------------------------------------------------------- readers
    def write(self, history: Sequence[Message]) -> None:
        """Archive the conversation as PaMER would have: chunks of >= 1,024 tokens of old blocks."""
        super().write(history)
        if "pamer_reader" in self.shared:  # PaMER and PaMER+ archive the same way: share it
            self.blocks, self.reader_state = self.shared["pamer_reader"]
            return
        blocks = split_steps(list(history))
        self.blocks = blocks
        state = _State()
        start, size = 0, 0
        end = max(0, len(blocks) - RECENT_BLOCKS)
        spans = []
        for i in range(end):
            size += self._tokens(blocks[i])
            if size >= TRIGGER_TOKENS:
                spans.append((blocks[start: i + 1], start, i + 1))
                start, size = i + 1, 0
        state.summaries = self._summarize_all(spans, "reader")
        state.archived = start
        self.reader_state = state
        self.shared["pamer_reader"] = (blocks, state)

    def question_context(self, question: Question, budget: int) -> list[Message]:
        fixed = [Message(role="user", content=question.text)]
        limit = self.env.effective(budget)
        if self.history_fits(fixed, limit):
            return [*self.history, *fixed]
        recent = self.blocks[max(self.reader_state.archived, len(self.blocks) - RECENT_BLOCKS):]
        q_vec = self._query(fixed, recent)
        selected = self._select(self.reader_state, q_vec)
        return self._assemble([], [], self.blocks, self.reader_state, selected, q_vec, limit, fixed)


class PaMERPlus(PaMER):
    """PaMER+: the raw blocks covered by the selected summaries, restored while they fit."""

    name = "pamer-plus"
    restore = True
