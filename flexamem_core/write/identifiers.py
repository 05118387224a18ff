"""The exact identifiers an agent unit's outputs revealed: paths (with line numbers), symbols,
error names, values, the strings a later command reuses verbatim.

A step's record keeps its command and the head of its output, so what the output revealed
(the path ``grep`` found, the test name a failure printed) is gone from the trace once the
unit leaves the recent window, unless the unit is recovered whole. Written once per unit
with its note, they let the timeline show those strings beside the step that revealed them
(:mod:`flexamem_core.recall.revealed`) at a few tokens each.

An identifier is a run of word characters, dots, slashes, colons and dashes of at least
four characters that holds a path or name separator, a digit or a camelCase hump (so
``django/db/models/query.py:123``, ``_filter_or_exclude``, ``test_0042``, ``QuerySet``,
``ValueError``), with trailing punctuation stripped and no two dots in a row (a test runner's
progress line such as ``sss......s`` is not a name); markup (a harness's tags such as
``<output_head>``, a terminal's colour codes) is not read. Each is kept with the number of the
unit's outputs (tool results, observations) and of its assistant messages
that contain it: the first says where it was revealed and how often it was printed, the
second whether the agent itself named it, which is what ranks it later (an identifier only
the agent named is kept too, with no output: it ranks what an earlier unit revealed).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..model.messages import Message

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_./:-]{3,}")
#: Markup around or inside an output (a harness's ``<output_head>``, ``<returncode>``, the
#: format it asks for; a terminal's colour codes such as ``\x1b[01m``): none of it is a name
#: the agent will reuse, and a colour code left in would glue its letter to the next word.
MARKUP = re.compile(r"</?[A-Za-z_][A-Za-z0-9_.-]*>|\x1b\[[0-9;]*[A-Za-z]")
_MARK = re.compile(r"[_./0-9]|[a-z][A-Z]")
#: Most identifiers kept per unit: a ``cat`` of a long file prints thousands; the ones
#: printed most, then the earliest, are kept (docs/evaluation.md says why this many).
MAX_PER_UNIT = 128

#: One identifier of a unit: (text, outputs that contain it, assistant messages that contain it).
Identifier = tuple[str, int, int]


def identifiers_in(text: str) -> list[str]:
    """The identifiers of a text outside its markup, in order, each once."""
    out: dict[str, None] = {}
    for match in _IDENTIFIER.findall(MARKUP.sub(" ", text)):
        s = match.rstrip(".:-/")
        if len(s) >= 4 and _MARK.search(s) and ".." not in s:
            out[s] = None
    return list(out)


def unit_identifiers(messages: Sequence[Message], limit: int = MAX_PER_UNIT) -> tuple[Identifier, ...]:
    """The identifiers of the unit's messages with their counts (module docstring), in the
    order first written: those an output printed, and those only the agent named (a later
    unit's mention ranks what an earlier one revealed). Over ``limit``, the ones in most
    messages are kept (ties: the first written)."""
    outputs: dict[str, int] = {}
    named: dict[str, int] = {}
    order: dict[str, None] = {}
    for m in messages:
        counts = named if m.role == "assistant" else outputs
        for s in identifiers_in(m.text):
            counts[s] = counts.get(s, 0) + 1
            order[s] = None
    kept = list(order)
    if len(kept) > limit:
        first = {s: i for i, s in enumerate(kept)}
        top = set(sorted(kept, key=lambda s: (-outputs.get(s, 0) - named.get(s, 0), first[s]))[:limit])
        kept = [s for s in kept if s in top]
    return tuple((s, outputs.get(s, 0), named.get(s, 0)) for s in kept)
