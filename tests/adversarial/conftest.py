"""Print the adversarial suite's cases per invariant at the end of the run."""

from __future__ import annotations

from .oracle import CHECKED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not CHECKED:
        return
    terminalreporter.section("adversarial cases checked per invariant")
    for name, n in sorted(CHECKED.items()):
        terminalreporter.write_line(f"{name:45s} {n:8d}")
