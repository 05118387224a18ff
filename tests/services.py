"""The test services of ``.ci/services.sh`` (PostgreSQL, a Chroma server), for every test folder
that needs one: the URL of a reachable server, else a skip with the reason, except under
CI=true, where an unreachable service fails the test."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

import pytest

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:54329/flexamem_test"
DEFAULT_CHROMA_URL = "chroma+http://127.0.0.1:58765"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _unavailable(what: str, why: str) -> None:
    message = f"{what} not reachable ({why}); start it with `source .ci/services.sh`"
    if IN_CI:
        pytest.fail(f"{message} [CI=true: service tests must run]")
    pytest.skip(message)


def postgres_url() -> str:
    url = os.environ.get("FLEXAMEM_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        _unavailable(f"PostgreSQL at {url}", f"{type(exc).__name__}: {exc}".strip()[:200])
    return url


def chroma_url() -> str:
    url = os.environ.get("FLEXAMEM_TEST_CHROMA_URL", DEFAULT_CHROMA_URL)
    parts = urlsplit(url)
    try:
        import urllib.request

        urllib.request.urlopen(f"http://{parts.hostname}:{parts.port}/api/v2/heartbeat", timeout=3).read()
        import chromadb  # noqa: F401
    except Exception as exc:
        _unavailable(f"Chroma at {url}", f"{type(exc).__name__}: {exc}"[:200])
    return url
