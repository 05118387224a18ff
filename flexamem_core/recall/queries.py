"""The query of a call: its vector (the one model call of a render) and the words that score
excerpts and pieces.

Agents: the normalized sum of the vectors of the task, the head of the newest unit and
``query=``; when ``query=`` or a human turn of the newest unit asks for something, its own
words score the excerpts and pieces (a newest unit full of output would drown them). Readers,
and a call with a current turn: the question.

The newest unit changes on every step, so its vector is the one model call an agent's step
cannot take from the cache. Its first :data:`QUERY_HEAD_CHARS` characters (the step's thought,
command and the head of its output) cost about half of the whole unit to embed (the model
reads a unit's first 256 word pieces) and find the same evidence (docs/evaluation.md says where
the length was chosen and checked). While
the newest unit grows by steps its head stays, and so does the vector: such a step embeds no
query at all. The query's words (BM25) still come from the whole newest unit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..index.embeddings import normalize
from ..model.messages import Message
from ..model.protocols import Embedder
from ..write.units import action_text
from .strategies.base import Query

if TYPE_CHECKING:
    from ..config import FlexAMemConfig

#: Characters of the newest unit an agent query's vector is embedded from (module docstring).
QUERY_HEAD_CHARS = 300


class QueryMaker:
    """Makes each call's :class:`Query`; the vectors of the last texts embedded are kept, so a
    call that renders more than once (a cache-stable request sizing its budget) embeds once."""

    def __init__(self, embedder: Any) -> None:
        #: A callable returning the embedder: the model is loaded on first use.
        self._embedder = embedder
        self._last: tuple[tuple[str, ...], np.ndarray] | None = None
        self._prefetched: str | None = None

    def task_input(self, cfg: FlexAMemConfig, task: Sequence[Message]) -> list[Callable[[], list[str]]]:
        """The task's text as an input to prefetch, the first time this maker sees it: every
        query of an agent's thread sums the task's vector, so it can be made while the host
        waits for its model (even on calls that pass the history through) rather than on the
        first call that renders. Each query text is embedded on its own (:meth:`_embed`), so
        the prefetched vector is the one the query would make."""
        text = task_text(task)
        if cfg.history != "agent" or not text or text == self._prefetched:
            return []
        self._prefetched = text
        return [lambda: [text]]

    def make(self, cfg: FlexAMemConfig, task: Sequence[Message], current: Sequence[Message],
             window_units: Sequence[Any], query: str | None) -> Query:
        """The query of a call: ``task`` and ``current`` are the layout's task and current turn,
        ``window_units`` the recent window's units (the newest last)."""
        task_words = task_text(task)
        newest = window_units[-1].raw if window_units else ""
        question = "\n".join(m.text for m in current)
        extra = query or ""
        if cfg.history == "agent" and not question:
            texts = [t for t in (task_words, newest[:QUERY_HEAD_CHARS], extra) if t]

            def vector() -> np.ndarray:
                embedder: Embedder = self._embedder()
                return normalize(sum(self._embed(texts), np.zeros(embedder.dim, dtype=np.float32)))

            focus = focus_of(cfg, window_units, query)
            if focus:
                return Query(vector, focus, focus, focus)
            return Query(vector, "\n".join(t for t in (newest, extra) if t),
                         "\n".join(t for t in (task_words, newest, extra) if t), "")
        q_text = "\n".join(t for t in (question, extra) if t) or task_words
        return Query(lambda: self._embed([q_text])[0], q_text, q_text, "")

    def _embed(self, texts: list[str]) -> np.ndarray:
        """The texts' vectors, each embedded on its own: in a shared call a text is padded to the
        longest, which changes its vector's low bits, so alone its vector is the same whatever
        else the query holds, and a prefetched one is the one it would make."""
        key = tuple(texts)
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        embedder = self._embedder()
        vecs = np.array(np.concatenate([embedder.embed([t]) for t in texts]) if texts else embedder.embed(texts),
                        copy=True)
        vecs.setflags(write=False)
        self._last = (key, vecs)
        return vecs


def task_text(task: Sequence[Message]) -> str:
    """The text of the task's messages, as a query sums it."""
    return "\n".join(m.text for m in task)


def focus_of(cfg: FlexAMemConfig, window_units: Sequence[Any], query: str | None) -> str:
    """What an agent call is asked, in words: ``query``, else the newest human turn of the
    newest unit (only where user messages are human turns: ``pin_user_turn``)."""
    if query:
        return query
    if not cfg.pin_user_turn or not window_units:
        return ""
    msgs = window_units[-1].messages
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].role == "user":
            # the observation of a text action (a command in a code block) is not a question
            answers_action = i > 0 and msgs[i - 1].role == "assistant" and bool(action_text(msgs[i - 1]))
            return "" if answers_action else msgs[i].text
    return ""
