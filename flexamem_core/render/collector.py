"""The cyclic garbage collector, paused while a namespace is loaded from its store.

Reopening a long namespace builds a great many long-lived objects (notes, their keys, the
index's lists, the matched chain) at once. Each of them counts towards the collector's
next full collection, so one lands inside the reopen and walks them all, and the young
generations walk them too. None of these objects is garbage. So the collector is paused
during the load, and what the load built is moved to its permanent generation
(``gc.freeze()``), which no collection walks. A call pauses it while it loads a namespace
and while it matches a reopened chain (as many units again, and their messages), not
while it writes: a first call may write thousands of units, embedding each, and the
host's own garbage would pile up meanwhile.

The pause is process-wide (the collector has no other switch), counted so that nested or
concurrent loads re-enable it once, after the last one, and only if it was enabled before.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with automatic garbage collection off; afterwards it is as it was."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()


def freeze_bulk(loaded: int) -> None:
    """After a bulk load of ``loaded`` units, inside a pause: move every object alive into the
    collector's permanent generation, so that no collection walks them again (the first
    young one after the pause would walk them all). Only for a bulk load (``BULK`` units or
    more): a freeze also keeps whatever cyclic garbage of the host's is alive at that moment
    until ``gc.unfreeze()``."""
    if loaded >= BULK:
        gc.freeze()


#: Units a load must bring to be frozen (:func:`freeze_bulk`).
BULK = 1_000
