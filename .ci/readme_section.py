"""Print the fenced ``python`` blocks of one README section, joined, for running elsewhere.

    python .ci/readme_section.py README.md "LangGraph and LangChain" > quickstart.py

Standard library only: it runs in the fresh virtualenvs where a framework's extra was
installed from the wheel, before anything else is.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
FENCE = re.compile(r"^\s{0,3}(`{3,})\s*([\w+-]*)\s*$")


def section_blocks(text: str, title: str) -> list[str]:
    """The python blocks under the heading ``title``, up to the next heading of its level or above."""
    out: list[str] = []
    level: int | None = None
    fence = ""  # the open fence, "" outside a block
    keep: list[str] | None = None  # the open block's lines when it is one to print
    for line in text.splitlines():
        if fence:
            if line.strip() == fence:
                if keep is not None:
                    out.append("\n".join(keep))
                fence, keep = "", None
            elif keep is not None:
                keep.append(line)
            continue
        opening = FENCE.match(line)
        if opening:
            fence = opening.group(1)
            keep = [] if level is not None and opening.group(2) == "python" else None
            continue
        heading = HEADING.match(line)
        if heading:
            depth = len(heading.group(1))
            if level is not None and depth <= level:
                break
            if heading.group(2) == title:
                level = depth
    return out


def main() -> int:
    path, title = sys.argv[1], sys.argv[2]
    found = section_blocks(Path(path).read_text(encoding="utf-8"), title)
    if not found:
        print(f"no python block under {title!r} in {path}", file=sys.stderr)
        return 1
    print("\n\n".join(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
