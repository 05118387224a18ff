"""Forgetting: deleting a unit, a thread or a tenant and everything derived from it.

Notes are write-once, but deletion is the one exception: a deleted unit takes with it
its note, pieces and embedding, the links that other notes hold to it (backends store
links so they can be removed, not merely filtered on read), and every memoised merged
record that covered it, directly or through another merged record. Merged records are
derived data: the core recomputes them from what remains on the next render.

Units whose ``parent`` was the deleted unit are kept; their ``parent`` key then names a
unit that no longer exists (the chain is cut there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from ..model.protocols import Store
from .names import check_namespace


@runtime_checkable
class ForgettingStore(Store, Protocol):
    """A store that can delete what it holds."""

    def delete_unit(self, namespace: str, key: str) -> bool:
        """Delete one unit and everything derived from it; False if it was not stored."""
        ...

    def delete_namespace(self, namespace: str) -> int:
        """Delete a whole namespace (thread or tenant); returns the number of units deleted."""
        ...


def merged_covering(covers: Mapping[str, Iterable[str]], deleted: Iterable[str]) -> set[str]:
    """Keys of merged records that cover any deleted key, directly or via another merge.

    ``covers`` maps each merged record's key to the keys it covers (unit keys or keys of
    lower-level merged records).
    """
    gone = set(deleted)
    dropped: set[str] = set()
    changed = True
    while changed:
        changed = False
        for key, covered in covers.items():
            if key not in dropped and not gone.isdisjoint(covered):
                dropped.add(key)
                gone.add(key)
                changed = True
    return dropped


def tenant_namespaces(store: Store, tenant: str) -> list[str]:
    """Namespaces of a tenant: the tenant's own and every ``tenant/...`` thread below it."""
    check_namespace(tenant)
    return [ns for ns in store.namespaces() if ns == tenant or ns.startswith(tenant + "/")]


def forget_tenant(store: ForgettingStore, tenant: str) -> int:
    """Delete a tenant: namespace ``tenant`` and all ``tenant/<thread>`` namespaces."""
    return sum(store.delete_namespace(ns) for ns in tenant_namespaces(store, tenant))
