"""Where an exact string lies in a rendered request: for ``flexamem demo``'s answer lines.

The memory message is read by its marks (:mod:`flexamem_core.recall.assembly`,
:mod:`flexamem_core.recall.unit_recovery`, :mod:`flexamem_core.recall.joins`): timeline lines
start ``- [label]``, a whole unit follows ``- [label] (raw)``, an excerpt follows a line
``(excerpt)``, and every line after the pieces' header is recovered pieces.
"""

from __future__ import annotations

import re

from flexamem_core.model.messages import message_text
from flexamem_core.recall.joins import PIECES_HEADER
from flexamem_core.request.marker import is_marked
from flexamem_core.request.rendered import Rendered

#: The places, in the order the answer line names them, and how it names them.
PLACES = {
    "piece": "a recovered piece",
    "raw": "a whole unit shown raw",
    "excerpt": "an excerpt",
    "record": "a timeline record",
    "message": "a message sent as it is",
}
_RAW_HEADER = re.compile(r"^- \[.*\] \(raw\)$")


def memory_places(memory_text: str, needle: str) -> set[str]:
    """The kinds of memory text (keys of :data:`PLACES`) whose lines hold ``needle``."""
    found: set[str] = set()
    kind = "record"
    for line in memory_text.split("\n"):
        if line == PIECES_HEADER:
            kind = "piece"  # the pieces close the memory: everything after is theirs
            continue
        if kind != "piece":
            if _RAW_HEADER.match(line):
                kind = "raw"
                continue
            if line == "(excerpt)":
                kind = "excerpt"
                continue
            if line.startswith("- ["):
                kind = "record"
        if needle in line:
            found.add(kind)
    return found


def places(rendered: Rendered, needle: str) -> list[str]:
    """Where ``needle`` is in the request: keys of :data:`PLACES`, in their order (empty: nowhere)."""
    found: set[str] = set()
    for m in rendered.messages:
        if is_marked(m.metadata):
            found |= memory_places(message_text(m), needle)
        elif needle in message_text(m):
            found.add("message")
    return [p for p in PLACES if p in found]


def answer_line(needle: str, where: list[str]) -> str:
    """``answer "X" in the request: yes (in a recovered piece)``, or ``: no``."""
    said = " and ".join(PLACES[p] for p in where)
    return f'answer "{needle}" in the request: ' + (f"yes (in {said})" if where else "no")
