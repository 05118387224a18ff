"""The shipped conformance suite, used the way a third-party backend would use it: a
``StoreBackend`` from a fixture, no conftest machinery (here a ``SQLiteStore`` subclass
standing in for someone else's backend)."""

from __future__ import annotations

import pytest

from flexamem_core.stores.sqlite import SQLiteStore
from flexamem_core.testing import StoreBackend, StoreConformance


class VendorStore(SQLiteStore):
    """Someone else's backend (reuses SQLite storage, but is known only through the suite)."""


class TestAThirdPartyStore(StoreConformance):
    @pytest.fixture
    def backend(self, tmp_path):
        path = tmp_path / "vendor.db"

        def raw_dump(_store):
            return b"".join(p.read_bytes() for p in tmp_path.glob("vendor.db*")).decode("utf-8", "replace")

        store = VendorStore(path)
        yield StoreBackend("vendor", store, raw_dump, reopen=lambda: VendorStore(path), examples=10)
        store.close()
