"""Test kits for FlexA-Mem backends (needs the ``test`` extra: pytest, hypothesis).

``StoreConformance`` is the store conformance suite the bundled backends pass; a
third-party store runs it by subclassing it with a ``backend`` fixture (see
:mod:`flexamem_core.testing.store_conformance`). ``storekit`` makes deterministic units,
notes and pieces with real content keys.
"""

from __future__ import annotations

from .backend import StoreBackend
from .store_conformance import StoreConformance

__all__ = ["StoreBackend", "StoreConformance"]
