"""Namespace names: validated once here so no backend ever interpolates a bad name."""

from __future__ import annotations

import re

_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,199}$")


class NamespaceError(ValueError):
    """Raised for an empty, too long or otherwise invalid namespace name."""


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is 1-200 characters of letters, digits and ``_.:@/-``."""
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise NamespaceError(
            f"invalid namespace {namespace!r}: use 1-200 characters of letters, digits and _.:@/- "
            "starting with a letter or digit"
        )
    return namespace
