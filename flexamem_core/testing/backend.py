"""What the conformance suite needs to know about a backend under test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model.protocols import Store


@dataclass
class StoreBackend:
    """A backend under test: a fresh store, how to reopen its data, how to read it raw.

    ``reopen`` returns a new store object on the same data (None: the store does not
    outlive its object, and the reopening tests are skipped). ``raw_dump`` returns
    everything the backend holds as text (files, rows, blobs), for the forgetting tests.
    ``examples`` is the number of operation sequences of the model-based test.
    ``piece_vectors``: whether the backend must keep each piece's own vector (True), or may
    drop them all (None: the capability test is skipped for it, and renders rank pieces by
    their unit's vector instead).
    """

    name: str
    first: Store
    raw_dump: Callable[[Store], str]
    reopen: Callable[[], Store] | None = None
    examples: int = 25
    piece_vectors: bool | None = None

    @property
    def persistent(self) -> bool:
        return self.reopen is not None

    def open(self) -> Store:
        if self.reopen is None:
            raise RuntimeError(f"{self.name} cannot be reopened")
        return self.reopen()
