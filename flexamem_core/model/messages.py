"""A small framework-neutral message type that every adapter converts to and from.

Adapters translate their framework's messages into :class:`Message` (never mutating the
host's objects) and translate the rendered messages back. Content may be a string or a
list of content parts; non-text parts are kept verbatim in the store and shown to the
memory as a short placeholder.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})

#: Control characters that are removed from text shown to a model (tab/newline/CR kept).
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]+")
#: What :func:`clean_text` changes: those control characters and lone surrogates.
_UNSENDABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


class MessageError(ValueError):
    """Raised for a message that cannot be understood (unknown role, bad content)."""


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an assistant message; ``arguments`` is the JSON (or raw) string."""

    name: str
    arguments: str = ""
    id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_any(cls, value: Any) -> ToolCall:
        """Accept a ToolCall, an OpenAI-style dict or a LangChain-style dict."""
        if isinstance(value, ToolCall):
            return value
        if not isinstance(value, Mapping):
            raise MessageError(f"tool call must be a mapping, got {type(value).__name__}")
        fn = value.get("function") if isinstance(value.get("function"), Mapping) else None
        name = (fn or value).get("name")
        args = (fn or value).get("arguments", (fn or value).get("args", ""))
        if not isinstance(args, str):
            args = json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)
        call_id = value.get("id")
        return cls(name=str(name or "unknown_tool"), arguments=args,
                   id=str(call_id) if call_id not in (None, "") else None)


@dataclass(frozen=True)
class Message:
    """One chat message. Frozen: the library never mutates a message it was given.

    ``metadata`` is not part of equality; readers may set ``session``, ``date`` and
    ``speaker`` there so sessions cut units and records say who spoke when.
    """

    role: Role
    content: str | tuple[Mapping[str, Any], ...] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    id: str | None = None
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise MessageError(f"unknown role {self.role!r}; expected one of {sorted(ROLES)}")
        if isinstance(self.content, list):
            object.__setattr__(self, "content", tuple(self.content))
        elif self.content is None:
            object.__setattr__(self, "content", "")
        elif not isinstance(self.content, (str, tuple)):
            raise MessageError(f"content must be str or a list of parts, not {type(self.content).__name__}")
        if not (isinstance(self.tool_calls, tuple) and all(isinstance(c, ToolCall) for c in self.tool_calls)):
            if self.tool_calls is not None and (isinstance(self.tool_calls, (str, bytes, Mapping))
                                                or not isinstance(self.tool_calls, Iterable)):
                raise MessageError(f"tool_calls must be a list of tool calls, not {type(self.tool_calls).__name__}")
            object.__setattr__(self, "tool_calls", tuple(ToolCall.from_any(c) for c in self.tool_calls or ()))
        if not isinstance(self.metadata, Mapping):
            raise MessageError(f"metadata must be a mapping, not {type(self.metadata).__name__}")
        for name in ("tool_call_id", "id", "name"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    object.__setattr__(self, name, str(value))  # a numeric id: the same id as text
                else:
                    raise MessageError(f"{name} must be a string, not {type(value).__name__}")

    @property
    def text(self) -> str:
        """The content as text: text parts joined, other parts as a short placeholder."""
        return content_text(self.content)

    def fingerprint(self) -> str:
        """A stable hash of what the message says (id excluded), used to detect edits."""
        # encode_basestring is what json.dumps(str, ensure_ascii=False) runs, without building
        # an encoder per call: the same bytes, faster when a reopen hashes every message.
        content = encode_basestring(self.content) if isinstance(self.content, str) else \
            json.dumps(_jsonable_content(self.content), sort_keys=True, ensure_ascii=False, default=str)
        calls = "".join(f"\x01{c.id}\x02{c.name}\x02{c.arguments}" for c in self.tool_calls) \
            if self.tool_calls else ""
        # One string, one encode, one hash: the same bytes as hashing the parts in turn.
        text = f"{self.role}\x00{content}{calls}\x03{self.tool_call_id}\x03{self.name}"
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form, the verbatim copy kept in the store."""
        return {
            "role": self.role,
            "content": _jsonable_content(self.content),
            "tool_calls": [c.to_dict() for c in self.tool_calls],
            "tool_call_id": self.tool_call_id,
            "id": self.id,
            "name": self.name,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build from :meth:`to_dict` output or an OpenAI-style message dict."""
        if not isinstance(data, Mapping):
            raise MessageError(f"message must be a mapping, got {type(data).__name__}")
        role = data.get("role")
        if role not in ROLES:
            raise MessageError(f"unknown role {role!r}; expected one of {sorted(ROLES)}")
        content = data.get("content")
        if isinstance(content, list):
            content = tuple(dict(p) if isinstance(p, Mapping) else {"type": "text", "text": str(p)}
                            for p in content)
        elif content is not None and not isinstance(content, str):
            content = str(content)
        return cls(
            role=role,
            content=content or "",
            tool_calls=tuple(ToolCall.from_any(c) for c in (data.get("tool_calls") or ())),
            tool_call_id=data.get("tool_call_id"),
            id=data.get("id"),
            name=data.get("name"),
            metadata=_metadata(data.get("metadata")),
        )


def _metadata(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MessageError(f"metadata must be a mapping, not {type(value).__name__}")
    return dict(value)


def _jsonable_content(content: str | tuple[Mapping[str, Any], ...]) -> Any:
    if isinstance(content, str):
        return content
    return [dict(p) for p in content]


def needs_cleaning(text: str) -> bool:
    """Whether :func:`clean_text` would change ``text`` (one regex scan in C)."""
    return _UNSENDABLE.search(text) is not None


def clean_text(text: str) -> str:
    """Make text safe to show and count: replace lone surrogates, drop control characters."""
    if not text or not needs_cleaning(text):
        return text or ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return _CONTROL_RE.sub("", text)


def content_text(content: str | Sequence[Mapping[str, Any]] | None) -> str:
    """Text of a message content; images, audio and files become ``[image]``-style marks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return clean_text(content)
    out: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            out.append(clean_text(str(part)))
            continue
        kind = str(part.get("type", "unknown"))
        if kind in ("text", "input_text", "output_text") or (kind == "unknown" and "text" in part):
            out.append(clean_text(str(part.get("text", ""))))
        else:
            label = kind.replace("_url", "").replace("input_", "")
            out.append(f"[{label}]")
    return "\n".join(out)


def tool_call_text(call: ToolCall) -> str:
    """One-line text of a tool call as shown in memory."""
    return f"{clean_text(call.name)}({clean_text(call.arguments)})"


def message_text(message: Message) -> str:
    """All the text a message carries (content plus tool calls), as counted and indexed."""
    parts = [message.text]
    parts.extend(f"[tool call {clean_text(c.id or '?')}] {tool_call_text(c)}" for c in message.tool_calls)
    return "\n".join(p for p in parts if p)


def quick_fingerprint(m: Message) -> tuple[Any, ...]:
    """Cheap in-process identity of a message (Python caches str hashes); ids included."""
    content = m.content if isinstance(m.content, str) else m.fingerprint()
    return (m.id, m.role, content, m.tool_call_id,
            tuple((c.id, c.name, c.arguments) for c in m.tool_calls))


def same_prefix(history: Sequence[Message], previous: Sequence[Message]) -> bool:
    """Whether ``history`` starts with the messages of ``previous`` (one identity pass in C,
    else fingerprints, for hosts that convert their messages anew on every call)."""
    if len(history) < len(previous):
        return False
    if all(map(operator.is_, history, previous)):
        return True
    return all(a is b or quick_fingerprint(a) == quick_fingerprint(b) for a, b in zip(history, previous))


def as_messages(history: Sequence[Message | Mapping[str, Any]]) -> list[Message]:
    """Accept :class:`Message` objects or message dicts; raise a clear error otherwise."""
    if isinstance(history, (str, bytes)):
        raise MessageError("history must be a sequence of messages, not a string")
    if isinstance(history, Mapping) or not isinstance(history, Iterable):
        raise MessageError(f"history must be a sequence of messages, not {type(history).__name__}")
    if isinstance(history, (list, tuple)) and set(map(type, history)) <= {Message}:
        return list(history)  # already core messages: one pass in C, no per-message Python work
    out: list[Message] = []
    for i, m in enumerate(history):
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            try:
                out.append(Message.from_dict(m))
            except MessageError as exc:
                raise MessageError(f"message {i}: {exc}") from None
        else:
            raise MessageError(f"message {i}: expected Message or dict, got {type(m).__name__}")
    return out
