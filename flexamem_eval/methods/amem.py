"""A-Mem style notes (Xu et al., 2025) retrieved by embedding, without an LLM.

The notes are the core's write-once notes (rule records, fields, embedding, three links),
so in this harness A-Mem's LLM-written note text is replaced by rule records: the report
names the method "amem (rule records)". A-Mem's search order is kept: notes by cosine with
the query, each followed by its linked notes. ``amem`` shows raw units in that order while
they fit, in time order; ``amem-fit-or-degrade`` gives each the highest resolution that
fits (raw, else its record), as FlexA-Mem's rule does, but without a timeline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from flexamem_core import Message
from flexamem_core.model.schema import Note

from ..items import Question
from .base import Method
from .layout import agent_view, fit, room_for_memory
from .ours import NAMESPACE, _Ours
from .retrieval import agent_query


def search_order(notes: Sequence[Note], q_vec: np.ndarray) -> list[int]:
    """Positions of notes by cosine, each followed by its not-yet-listed linked notes."""
    if not notes:
        return []
    pos = {n.unit_key: i for i, n in enumerate(notes)}
    links: dict[int, set[int]] = {i: set() for i in range(len(notes))}
    for i, n in enumerate(notes):
        for key in n.links:
            if key in pos:
                links[i].add(pos[key])
                links[pos[key]].add(i)
    cos = np.stack([np.asarray(n.embedding, dtype=np.float32) for n in notes]) @ q_vec
    order: list[int] = []
    seen: set[int] = set()
    for i in np.lexsort((np.arange(len(notes)), -cos)).tolist():
        for j in [i, *sorted(links[i], key=lambda k: (-cos[k], k))]:
            if j not in seen:
                seen.add(j)
                order.append(j)
    return order


class AMem(_Ours):
    """Raw notes in A-Mem's search order while they fit, shown in time order."""

    name = "amem"
    degrade = False
    switches: ClassVar[dict[str, dict[str, Any]]] = {}

    def _choose(self, notes: Sequence[Note], order: Sequence[int], room: int) -> list[tuple[int, str]]:
        chosen: list[tuple[int, str]] = []
        used = 0
        for i in order:
            raw_cost = notes[i].raw_tokens + 2
            if used + raw_cost <= room:
                chosen.append((i, "raw"))
                used += raw_cost
            elif self.degrade and used + notes[i].record_tokens + 2 <= room:
                chosen.append((i, "record"))
                used += notes[i].record_tokens + 2
        return chosen

    def _renderer(self, mem_kind: str, notes: Sequence[Note]):
        store = self.memory(mem_kind).store

        def render(chosen: list[tuple[int, str]]) -> str:
            parts = []
            for i, resolution in sorted(chosen):
                note = notes[i]
                if resolution == "raw":
                    parts.append(store.get_unit(NAMESPACE, note.unit_key).raw)
                else:
                    parts.append(f"- [{note.label}] {note.record}" if note.label else f"- {note.record}")
            return "\n\n".join(parts)

        return render

    def question_context(self, question: Question, budget: int) -> list[Message]:
        fixed = [Message(role="user", content=question.text)]
        limit = self.env.effective(budget)
        if self.history_fits(fixed, limit):
            return [*self.history, *fixed]
        notes = self.memory("reader").store.notes(NAMESPACE)
        order = search_order(notes, self.env.embedder.embed([question.text])[0])
        chosen = self._choose(notes, order, room_for_memory(self.env, [], fixed, limit))
        return fit(self.env, [], fixed, chosen, self._renderer("reader", notes), limit)

    # The base rule (passthrough, else fit_step), not FlexA-Mem's render that _Ours uses.
    step_context = Method.step_context

    def fit_step(self, history: Sequence[Message], budget: int, limit: int) -> list[Message]:
        mem = self.memory("agent", budget)  # the units agent_view packs at this budget
        self._ingest(mem, history, final=False)
        view = agent_view(self.env, history, budget, self.shared.setdefault("amem_pack", {}))
        old = {u.key for u in view.old}
        notes = [n for n in mem.store.notes(NAMESPACE) if n.unit_key in old]
        order = search_order(notes, agent_query(self.env, view))
        window = view.window
        chosen = self._choose(notes, order, room_for_memory(self.env, view.prefix, window, limit))
        return fit(self.env, view.prefix, window, chosen, self._renderer("agent", notes), limit)


class AMemFitOrDegrade(AMem):
    """The same notes rendered by fit-or-degrade: raw when it fits, else the record."""

    name = "amem-fit-or-degrade"
    degrade = True


__all__ = ["AMem", "AMemFitOrDegrade", "Method", "search_order"]
