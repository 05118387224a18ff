"""The message-structure checks every core test asserts, written once."""

from __future__ import annotations

import re

from flexamem_core import Message


def pairing_problem(messages: list[Message]) -> str | None:
    """Why tool calls and results do not pair up (None when they do): every call has a
    unique id and its results follow it before any other message; no orphan result."""
    open_ids: list[str] = []
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id not in open_ids:
                return f"orphan tool result {m.tool_call_id!r}"
            open_ids.remove(m.tool_call_id)
            continue
        if open_ids:
            return f"tool calls without results: {open_ids}"
        if m.role == "assistant" and m.tool_calls:
            ids = [c.id for c in m.tool_calls]
            if any(i is None for i in ids) or len(set(ids)) != len(ids):
                return f"missing or repeated tool call ids: {ids}"
            open_ids = list(ids)  # type: ignore[arg-type]
    return f"tool calls without results: {open_ids}" if open_ids else None


def structure_problem(messages: list[Message]) -> str | None:
    """Pairing problems, or more than one system message, or one that is not first."""
    systems = [i for i, m in enumerate(messages) if m.role == "system"]
    if systems not in ([], [0]):
        return f"system messages at {systems}"
    return pairing_problem(messages)


_UNSENDABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def sent_text(m: Message) -> str:
    """The text of a message as the provider receives it: the raw fields, nothing cleaned.

    Written apart from the library's counter: content as given (text parts joined, other
    parts as their ``[kind]`` mark, the documented placeholder), then each tool call."""
    if isinstance(m.content, str):
        parts = [m.content]
    else:
        parts = [str(p.get("text", "")) if str(p.get("type", "unknown")) in ("text", "input_text", "output_text")
                 or (p.get("type") is None and "text" in p)
                 else "[" + str(p.get("type", "unknown")).replace("_url", "").replace("input_", "") + "]"
                 for p in m.content]
    text = "\n".join(parts)
    calls = [f"[tool call {c.id or '?'}] {c.name}({c.arguments})" for c in m.tool_calls]
    return "\n".join(p for p in [text, *calls] if p)


def independent_tokens(messages: list[Message]) -> int:
    """Tokens of a request as sent: o200k ``encode_ordinary`` of each message's raw text, whole
    (no chunking), plus the chat format's 4 per message and 3 per request."""
    from flexamem_core.tokens import load_o200k_encoding

    enc = load_o200k_encoding()
    if not messages:
        return 0
    return 3 + sum(4 + len(enc.encode_ordinary(sent_text(m))) for m in messages)


def unsendable(messages: list[Message]) -> list[int]:
    """Positions of messages that carry a control character or a lone surrogate anywhere."""
    def dirty(v: object) -> bool:
        if isinstance(v, str):
            return _UNSENDABLE.search(v) is not None
        if isinstance(v, dict):
            return any(dirty(x) for x in v.values())
        if isinstance(v, (list, tuple)):
            return any(dirty(x) for x in v)
        return False
    return [i for i, m in enumerate(messages) if dirty(m.to_dict() | {"metadata": {}})]


def steps(n: int, start: int = 0, size: int = 40) -> list[dict]:
    """``n`` mini-swe-agent-style steps (a command, then its output of ``size`` word pairs)."""
    out = []
    for i in range(start, start + n):
        out += [{"role": "assistant", "content": f"```bash\ncat notes_{i}.txt\n```", "id": f"a{i}"},
                {"role": "user", "content": f"<returncode>0</returncode>\nnote {i}: " + "lorem ipsum " * size,
                 "id": f"o{i}"}]
    return out
