"""The cyclic garbage collector, paused while a namespace is loaded from its store.

Reopening a 10,000-unit namespace builds about a million long-lived objects (notes, their
keys, the index's lists, the matched chain) in a fraction of a second. Each of them counts
towards the collector's next full collection, so one lands inside the reopen and walks
them all: 150 of about 900 ms in the bench's reopen at 9,999 units, and the young
generations another 50. None of these objects is garbage. CPython's own advice for a bulk
load is to pause the collector and then ``gc.freeze()`` what was loaded, which the caller
does once the namespace's first call is done.

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
