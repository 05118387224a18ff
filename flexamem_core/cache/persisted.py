"""The previous cache-stable request of a thread, saved in the store so any process continues it.

A thread served by several workers (LangGraph server replicas, a job queue), or by one
process that restarts, would otherwise render afresh whenever a call lands on a process
that did not make the previous request: the cached prefix breaks, and two workers send
different requests for the same history. With a store that has the ``RequestStates``
capability, every cache-stable call saves its request (small: the messages the history
does not hold verbatim, chiefly the memory message, and how many of the history's newest
messages end it), and every call first reads the saved one: when another process saved it,
the call continues that request exactly as the process that made it would have.

The saved state names the history it was made from by the digest of its messages
(:class:`~flexamem_core.model.history.PrefixDigests`): a history that does not start with
those messages (a fork, an edit) renders afresh, as it does in one process.

Format: zlib-compressed JSON, versioned by ``FORMAT`` (another version is ignored: the
next call renders afresh and saves its own).
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from ..model.messages import Message
from ..render.outcome import CacheStep, Outcome, Report
from ..request.properties import sendable
from .sent import SentRequest

FORMAT = 1


def _verbatim_tail(sent: SentRequest) -> int:
    """How many of the request's last messages are the history's last ``sent.length`` messages,
    each as sent (:func:`sendable`): the state names them by position instead of holding them."""
    out, source, n = sent.messages, sent.source, 0
    while n < min(len(out), sent.length):
        a, b = out[-1 - n], sendable(source[sent.length - 1 - n])
        if not (a is b or (a == b and a.metadata == b.metadata)):
            break
        n += 1
    return n


def encode(sent: SentRequest, digest: bytes) -> bytes:
    """The saved form of ``sent``; ``digest`` names ``sent.source[:sent.length]``."""
    tail = _verbatim_tail(sent)
    literal = sent.messages[:len(sent.messages) - tail]
    outcome = sent.outcome
    state = {
        "format": FORMAT, "budget": sent.budget, "extra_tokens": sent.extra_tokens, "query": sent.query,
        "length": sent.length, "digest": digest.hex(), "verbatim_from": sent.verbatim_from,
        "old_units": sent.old_units, "literal": [m.to_dict() for m in literal], "tail": tail,
        "memory_text": outcome.memory_text, "tokens": outcome.tokens,
        "report": _report_fields(outcome.report),
    }
    return zlib.compress(json.dumps(state, separators=(",", ":"), default=str).encode("ascii"), 1)


def decode(data: bytes, history: list[Message], digest_at: Callable[[Sequence[Message], int], bytes]) \
        -> SentRequest | None:
    """The request saved in ``data`` when ``history`` starts with the messages it was made from;
    None otherwise (another history, another format, or data this version cannot read)."""
    try:
        state = json.loads(zlib.decompress(data))
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            return None
        length, tail = int(state["length"]), int(state["tail"])
        if not 0 <= tail <= length <= len(history) or digest_at(history, length).hex() != state["digest"]:
            return None
        messages = [Message.from_dict(m) for m in state["literal"]]
        messages += [sendable(m) for m in history[length - tail:length]]
        outcome = Outcome(messages, state["memory_text"], int(state["tokens"]), _report(state["report"]))
        return SentRequest(int(state["budget"]), int(state["extra_tokens"]), state["query"], history, outcome,
                           state["verbatim_from"], state["old_units"], length)
    except (ValueError, KeyError, TypeError, zlib.error):
        return None  # not a state this version wrote: the call renders afresh


def _report_fields(report: Report) -> dict[str, Any]:
    """The report's fields as JSON can write them (its rows are JSON values already: no deep
    copy, which would cost more than the rest of an appended call)."""
    out = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
    if report.cache is not None:
        out["cache"] = dataclasses.asdict(report.cache)
    return out


def _report(fields: dict[str, Any]) -> Report:
    fields = dict(fields)
    cache = fields.pop("cache", None)
    strategy = fields.pop("strategy", None)
    return Report(**fields, cache=CacheStep(**cache) if cache is not None else None,
                  strategy=(strategy[0], strategy[1]) if strategy is not None else None)
