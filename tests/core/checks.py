"""The message-structure checks every core test asserts, written once."""

from __future__ import annotations

import json
import re
import threading
import time

from flexamem_core import Message
from flexamem_core.index.embeddings import SentenceTransformerEmbedder


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
    """The content of a message as the provider receives it: the raw field, nothing cleaned.

    Written apart from the library's counter: content as given (text parts joined, other
    parts as their ``[kind]`` mark, the documented placeholder)."""
    if isinstance(m.content, str):
        return m.content
    return "\n".join(str(p.get("text", "")) if str(p.get("type", "unknown")) in ("text", "input_text", "output_text")
                     or (p.get("type") is None and "text" in p)
                     else "[" + str(p.get("type", "unknown")).replace("_url", "").replace("input_", "") + "]"
                     for p in m.content)


def sent_calls(m: Message) -> str:
    """The ``tool_calls`` field of a message as the request body carries it (compact JSON, as httpx
    writes it; ``arguments`` a JSON string inside it), or "" for none."""
    if not m.tool_calls:
        return ""
    return json.dumps([{"id": c.id or "", "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                       for c in m.tool_calls], ensure_ascii=False, separators=(",", ":"))


def independent_tokens(messages: list[Message]) -> int:
    """Tokens of a request as sent: o200k ``encode_ordinary`` of each field the message carries,
    whole (no chunking): its content, its tool calls as JSON, its ``tool_call_id`` and its name
    (plus one, as OpenAI's cookbook counts a name), and the chat format's 4 per message and 3 per
    request."""
    from flexamem_core.request.tokens import load_o200k_encoding

    enc = load_o200k_encoding()
    if not messages:
        return 0
    total = 3
    for m in messages:
        total += 4 + len(enc.encode_ordinary(sent_text(m))) + len(enc.encode_ordinary(sent_calls(m)))
        total += len(enc.encode_ordinary(m.tool_call_id or ""))
        total += 1 + len(enc.encode_ordinary(m.name)) if m.name else 0
    return total


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


class CountingEmbedder:
    """Delegates to a real embedder and records how many texts each call embeds, and which
    (to show what a write or a render embedded, and that a render embeds nothing but its query)."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.calls: list[int] = []
        self.texts: list[str] = []

    def embed(self, texts):
        self.calls.append(len(texts))
        self.texts.extend(texts)
        return self.inner.embed(texts)


class RecordingEmbedder(SentenceTransformerEmbedder):
    """The real model, recording which texts reach it and on which thread (``delay``: the
    background work slowed down on purpose, before it starts)."""

    def __init__(self, shared: SentenceTransformerEmbedder, delay: float = 0.0, prefetching: bool = True) -> None:
        super().__init__(precision="float32")
        self._model, self.dim = shared._load(), shared.dim  # one loaded model for every test
        self.delay, self.prefetching = delay, prefetching
        self.encoded: list[tuple[str, str]] = []

    def _encode(self, texts):
        self.encoded += [(threading.current_thread().name, t) for t in texts]
        return super()._encode(texts)

    def _run_prefetch(self, texts):
        time.sleep(self.delay)
        super()._run_prefetch(texts)

    def __getattribute__(self, name):
        if name == "prefetch" and not object.__getattribute__(self, "prefetching"):
            raise AttributeError(name)  # an embedder without prefetch, as a user's may be
        return object.__getattribute__(self, name)
