"""History to units: agent steps packed to ~1,000 tokens, reader spans cut at user turns.

A *step* is an assistant message with everything that answers it (tool results, or the
observation a text-action agent such as mini-swe-agent sends back as a user message);
it is never split. Agent units pack whole steps until a unit reaches
``agent_unit_tokens``; a unit only closes once the next step has begun, so a step's
results can never be cut off. Reader units are spans of one session, cut before a user
turn that would take the span past ``reader_unit_tokens``.

Packing is deterministic in the prefix, so a unit closed once closes the same way on
every later call; that is what makes ingestion idempotent.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model.messages import Message, message_text, tool_call_text
from ..model.protocols import Tokenizer
from ..model.schema import Unit, UnitKind

_BASH_BLOCK = re.compile(r"```(?:[a-zA-Z0-9_+-]*)\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Block:
    """One message of a unit as text: a header line and the message's content."""

    header: str
    body: str
    label: str

    @property
    def text(self) -> str:
        return f"{self.header}\n{self.body}" if self.body else self.header


@dataclass(frozen=True)
class PackedUnit:
    """A unit before it is stored: its messages, blocks and whether it is complete."""

    messages: tuple[Message, ...]
    blocks: tuple[Block, ...]
    tokens: int
    closed: bool
    first_step: int
    session: str | None

    @property
    def raw(self) -> str:
        return "\n\n".join(b.text for b in self.blocks)


def action_text(message: Message) -> str:
    """The action of an assistant message: its tool calls, or the command in its code block."""
    if message.tool_calls:
        return "; ".join(tool_call_text(c) for c in message.tool_calls)
    match = _BASH_BLOCK.search(message.text)
    if match:
        return match.group(1).strip()
    return ""


def first_line(text: str, limit: int = 100) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def speaker_of(message: Message) -> str:
    """Who said it: an explicit speaker/name, else the role."""
    meta_speaker = message.metadata.get("speaker") if message.metadata else None
    return str(meta_speaker or message.name or message.role)


def agent_blocks(messages: Sequence[Message], first_step: int) -> tuple[list[Block], int]:
    """Blocks of agent steps; returns them and the number of the next step."""
    blocks: list[Block] = []
    step = first_step - 1
    command = ""
    for m in messages:
        if m.role == "assistant":
            step += 1
            command = first_line(action_text(m) or m.text)
        label = f"step {max(step, 0)}: {command}" if command else f"step {max(step, 0)}"
        if m.role == "tool":
            header = f"[step {max(step, 0)}] tool result" + (f" ({m.name})" if m.name else "")
        else:
            header = f"[step {max(step, 0)}] {speaker_of(m)}"
        blocks.append(Block(header=header, body=message_text(m), label=label))
    return blocks, step + 1


def reader_blocks(messages: Sequence[Message]) -> list[Block]:
    """Blocks of conversation turns, headed by their speaker.

    The date is said once: the unit's label carries its first date (``unit_label``), so a
    turn's header names its date only where the date changes within the span (a session
    has one date, so usually never). A per-turn date cost a conversation of short turns
    about a third of its tokens, in every raw unit, excerpt and piece shown."""
    out = []
    current = _first_date(messages)
    for m in messages:
        speaker = speaker_of(m)
        date = m.metadata.get("date") if m.metadata else None
        if date and date != current:
            current = date
            header = f"[{date}] {speaker}:"
        else:
            header = f"{speaker}:"
        out.append(Block(header=header, body=message_text(m), label=speaker))
    return out


def _first_date(messages: Sequence[Message]) -> Any:
    return next((m.metadata.get("date") for m in messages if m.metadata and m.metadata.get("date")), None)


def split_steps(messages: Sequence[Message]) -> list[list[Message]]:
    """Group messages into steps: each assistant message starts a new step."""
    steps: list[list[Message]] = []
    for m in messages:
        if m.role == "assistant" or not steps:
            steps.append([m])
        else:
            steps[-1].append(m)
    return steps


def pack_agent(messages: Sequence[Message], tokenizer: Tokenizer, unit_tokens: int,
               first_step: int = 1, final: bool = False) -> list[PackedUnit]:
    """Pack agent steps into units of at least ``unit_tokens`` (the last may be open)."""
    units: list[PackedUnit] = []
    cur_msgs: list[Message] = []
    cur_blocks: list[Block] = []
    cur_tokens = 0
    cur_first = first_step
    step_no = first_step
    for step in split_steps(messages):
        if cur_msgs and cur_tokens >= unit_tokens:
            units.append(PackedUnit(tuple(cur_msgs), tuple(cur_blocks), cur_tokens, True, cur_first, None))
            cur_msgs, cur_blocks, cur_tokens, cur_first = [], [], 0, step_no
        blocks, step_no = agent_blocks(step, step_no)
        cur_msgs.extend(step)
        cur_blocks.extend(blocks)
        cur_tokens += sum(tokenizer.count(b.text) for b in blocks)
    if cur_msgs:
        units.append(PackedUnit(tuple(cur_msgs), tuple(cur_blocks), cur_tokens, final, cur_first, None))
    return units


def closes_as_is(packed: PackedUnit, kind: UnitKind, unit_tokens: int) -> bool:
    """Whether the next step closes this open unit as it stands: an agent unit of at least
    ``unit_tokens`` closes when any step arrives (:func:`pack_agent`); a conversation span's
    end depends on the next turn's session and size, unknown until it comes."""
    return kind == "agent" and not packed.closed and bool(packed.messages) and packed.tokens >= unit_tokens


def pack_reader(messages: Sequence[Message], tokenizer: Tokenizer, unit_tokens: int,
                final: bool) -> list[PackedUnit]:
    """Cut a conversation into spans: sessions always cut, user turns cut near the limit."""
    units: list[PackedUnit] = []
    cur: list[Message] = []
    cur_tokens = 0
    cur_session: str | None = None

    def close(closed: bool) -> None:
        nonlocal cur, cur_tokens
        if cur:
            blocks = reader_blocks(cur)
            units.append(PackedUnit(tuple(cur), tuple(blocks), cur_tokens, closed, 0, cur_session))
        cur, cur_tokens = [], 0

    for m in messages:
        session = str(m.metadata.get("session")) if m.metadata and "session" in m.metadata else None
        tokens = tokenizer.count(reader_blocks([m])[0].text)
        if (cur and session != cur_session) or (cur and m.role == "user" and cur_tokens + tokens > unit_tokens):
            close(True)
        cur_session = session
        cur.append(m)
        cur_tokens += tokens
    close(final)
    return units


def pack_units(messages: Sequence[Message], kind: UnitKind, tokenizer: Tokenizer, unit_tokens: int,
               *, first_step: int = 1, final: bool = False) -> list[PackedUnit]:
    """History (after the fixed prompt) to packed units of the given kind."""
    if kind == "agent":
        return pack_agent(messages, tokenizer, unit_tokens, first_step, final)
    return pack_reader(messages, tokenizer, unit_tokens, final)


def unit_key(messages: Sequence[Message], kind: UnitKind, parent: str | None) -> str:
    """Content address of a unit: its kind, its parent and what its messages say (with ids)."""
    h = hashlib.sha256(f"{kind}\x00{parent or ''}".encode())
    for m in messages:
        h.update(f"\x01{m.id or ''}\x02{m.fingerprint()}".encode())
    return h.hexdigest()[:32]


#: Starts every digest this version writes; a note whose digest lacks it is checked by key.
DIGEST_FORMAT = "d2:"


def messages_digest(messages: Sequence[Message], kind: UnitKind) -> str:
    """A quick digest of a unit's kind and what its messages say, ids included: one hash over
    length-prefixed fields (unambiguous), so a reopened chain is checked in a fraction of
    the time of :func:`unit_key`, which hashes each message's JSON form apart. Used only to
    confirm that the caller's messages are a stored unit's; the key stays the identity."""
    parts = [kind]
    for m in messages:
        c = m.content if isinstance(m.content, str) else m.fingerprint()
        i, t, n = m.id, m.tool_call_id, m.name  # None is "-", a string is "<length>:<text>"
        parts.append(f"\x00{m.role}{len(c)}:{c}{'-' if i is None else f'{len(i)}:{i}'}"
                     f"{'-' if t is None else f'{len(t)}:{t}'}{'-' if n is None else f'{len(n)}:{n}'}"
                     f"{len(m.tool_calls)}")
        for call in m.tool_calls:
            ci, a = call.id, call.arguments
            parts.append(f"{'-' if ci is None else f'{len(ci)}:{ci}'}{len(call.name)}:{call.name}{len(a)}:{a}")
    return DIGEST_FORMAT + hashlib.blake2b("".join(parts).encode("utf-8", "surrogatepass"),
                                           digest_size=16).hexdigest()


def to_unit(packed: PackedUnit, kind: UnitKind, parent: str | None) -> Unit:
    """Give a packed unit its content key and chain parent."""
    return Unit(key=unit_key(packed.messages, kind, parent), kind=kind, messages=packed.messages,
                raw=packed.raw, tokens=packed.tokens, parent=parent, first_step=packed.first_step,
                session=packed.session)


class StoredUnit(Unit):
    """A stored unit matched by its content key against the caller's messages.

    Its messages are the caller's own objects (the key proves they say the same); its raw
    text, token count and session are read from the store on first use, since a chain
    matched after a reopen is thousands of units of which a render reads a few.
    """

    _LAZY = ("raw", "tokens", "session")

    @classmethod
    def lazy(cls, store: Any, namespace: str, key: str, kind: UnitKind, messages: tuple[Message, ...],
             parent: str | None, first_step: int) -> StoredUnit:
        self = object.__new__(cls)
        for name, value in (("key", key), ("kind", kind), ("messages", messages), ("parent", parent),
                            ("first_step", first_step), ("_source", (store, namespace))):
            object.__setattr__(self, name, value)
        return self

    def __getattr__(self, name: str) -> Any:  # only called for attributes not yet set
        source = self.__dict__.get("_source")
        if name not in self._LAZY or source is None:
            raise AttributeError(name)
        stored = source[0].get_unit(source[1], self.key)
        for field_name in self._LAZY:
            object.__setattr__(self, field_name, getattr(stored, field_name))
        return self.__dict__[name]


def unit_blocks(unit: Unit) -> list[Block]:
    """Recompute the blocks of a stored unit (the same text as its raw)."""
    if unit.kind == "agent":
        return agent_blocks(unit.messages, unit.first_step)[0]
    return reader_blocks(unit.messages)


def next_step(unit: Unit) -> int:
    """The step number that follows a stored agent unit."""
    return unit.first_step + sum(1 for m in unit.messages if m.role == "assistant")


def unit_label(unit: Unit) -> str:
    """How a unit is named in the memory: its steps, or its date (else its session): a
    session's own id says nothing to the model that its date does not, and costs tokens."""
    if unit.kind == "agent":
        last = next_step(unit) - 1
        return f"step {unit.first_step}" if last <= unit.first_step else f"steps {unit.first_step}-{last}"
    date = _first_date(unit.messages)
    return str(date or (f"session {unit.session}" if unit.session else "conversation"))
