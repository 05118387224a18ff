"""Open a page in a real headless Chromium (Debian's package) through Playwright.

Locally the browser tests skip with the reason when Chromium or Playwright is missing;
under ``CI=true`` they fail instead, so CI (``.ci/run`` installs Chromium) always runs them.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


def chromium_path() -> str | None:
    """The system Chromium: ``$FLEXAMEM_CHROMIUM`` or the first of Debian's names on PATH."""
    given = os.environ.get("FLEXAMEM_CHROMIUM")
    if given:
        return given
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def need_browser() -> str:
    """The Chromium path, or skip (locally) / fail (CI) with the reason."""
    reason = None
    path = chromium_path()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "playwright is not installed (pip install playwright; it drives the system Chromium)"
    if path is None:
        reason = "Chromium is not installed (apt-get install chromium)"
    if reason is None:
        return str(path)
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but the browser test cannot run: {reason}")
    pytest.skip(reason)


@dataclass
class PageVisit:
    """What the browser saw: console messages, page errors, and facts read from the page."""

    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def problems(self) -> list[str]:
        return self.errors + [f"{kind}: {text}" for kind, text in self.console if kind in ("error", "warning")]


def visit(page_file: Path, screenshot: Path, script: str = "() => ({})") -> PageVisit:
    """Load ``page_file``, open every ``<details>``, evaluate ``script``, take a full-page screenshot."""
    from playwright.sync_api import sync_playwright

    seen = PageVisit()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=need_browser(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: seen.console.append((m.type, m.text)))
            page.on("pageerror", lambda e: seen.errors.append(str(e)))
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            first = page.locator("details > summary").first
            if first.count():
                first.click()  # a real click-through: the messages of the first step open
            seen.facts = page.evaluate(script)
            page.screenshot(path=str(screenshot), full_page=False)
        finally:
            browser.close()
    return seen
