"""The store conformance suite (``flexamem_core.testing``) on every bundled backend.

The ``backend`` fixture (``conftest.py``) yields each backend in turn: in-memory, SQLite,
PostgreSQL, embedded and client-server Chroma, and the LangGraph BaseStore adapter on
langgraph's InMemoryStore and SqliteStore. A third-party backend runs the same suite the
same way, with its own fixture.
"""

from __future__ import annotations

from flexamem_core.testing import StoreConformance


class TestBundledBackends(StoreConformance):
    """Every test of the suite, on every bundled backend."""
