"""Keep model loading and catch-up writing off the first call's silent path.

Loading all-MiniLM-L6-v2 (importing torch, reading the weights) takes seconds; done
inside the first render it looks like a hang. :func:`warm_embedder` does it up front (or
in a background thread, :func:`warm_in_background`), and :func:`catch_up` shows a tqdm bar
when a render has many units to write first (a resumed long thread), off when stderr is
not a terminal.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from tqdm import tqdm

from ..logs import logger

#: A render that must write at least this many units first shows a progress bar.
CATCH_UP_BAR_UNITS = 32


def warm_embedder(embedder: Any) -> float:
    """Load the embedder's model and run it once; returns the seconds it took."""
    start = time.perf_counter()
    load = getattr(embedder, "load", None)
    if callable(load):
        load()
    else:
        embedder.embed(["warm up"])
    return time.perf_counter() - start


def warm_in_background(get_embedder: Any, name: str = "flexamem-warm") -> threading.Thread:
    """Start a daemon thread that loads the embedder (``get_embedder()`` then warm it).

    A render that needs the model meanwhile waits on the embedder's own load lock, so it
    never loads twice; an error is logged, and the first render then loads (or fails) itself.
    """

    def target() -> None:
        try:
            warm_embedder(get_embedder())
        except Exception:  # the first render will report it where the caller sees it
            logger.exception("warming the embedder in the background failed")

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def catch_up(n_units: int, namespace: str, progress: Any = None, deferred: bool = False) -> Iterator[Any]:
    """The progress object for writing ``n_units`` notes: the caller's, a tqdm bar for a long
    catch-up (disabled when stderr is not a terminal, so logs stay clean), or None.
    ``deferred``: the notes' vectors are made after the call (:mod:`flexamem_core.render.note_fill`)."""
    if progress is not None or n_units < CATCH_UP_BAR_UNITS:
        yield progress
        return
    logger.info("namespace %s: writing notes for %d units not yet stored%s", namespace, n_units,
                " (their vectors are embedded in the background after this call)" if deferred else "")
    start = time.perf_counter()
    with tqdm(total=n_units, desc=f"flexamem: notes for {namespace}", unit="unit", disable=None,
              leave=False) as bar:
        yield LoggedProgress(bar, n_units, namespace)
    logger.info("namespace %s: %d units written in %.1f s", namespace, n_units, time.perf_counter() - start)


#: Seconds between the INFO lines of a long catch-up.
PROGRESS_LOG_SECONDS = 10.0


class LoggedProgress:
    """A catch-up's progress bar that also logs, every :data:`PROGRESS_LOG_SECONDS`, how many
    units are written and about how long the rest will take: the bar is off where stderr is
    not a terminal (a server, a batch job), and a first call over a long history can take
    minutes, so the host's logs say what it is waiting for."""

    def __init__(self, bar: Any, total: int, namespace: str) -> None:
        self.bar, self.total, self.namespace = bar, total, namespace
        self.done = 0
        self.start = self.logged = time.perf_counter()

    def update(self, n: int = 1) -> None:
        self.bar.update(n)
        self.done += n
        now = time.perf_counter()
        if now - self.logged >= PROGRESS_LOG_SECONDS and self.done < self.total:
            self.logged = now
            rate = self.done / max(now - self.start, 1e-9)
            logger.info("namespace %s: %d of %d units written, about %.0f s left", self.namespace, self.done,
                        self.total, (self.total - self.done) / rate)
