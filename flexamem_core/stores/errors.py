"""Errors shared by the store registry and the backends (kept apart to avoid import cycles)."""

from __future__ import annotations


class StoreURLError(ValueError):
    """Raised for a store URL that names no registered backend or is malformed."""
