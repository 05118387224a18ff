"""The previous cache-stable request of a thread, saved in the store so any process continues it.

A thread served by several workers (LangGraph server replicas, a job queue), or by one
process that restarts, would otherwise render afresh whenever a call lands on a process
that did not make the previous request: the cached prefix breaks, and two workers send
different requests for the same history. With a store that has the ``RequestStates``
capability, every cache-stable call saves its request (a few kB compressed: at most a
budget's worth of messages), and every call first reads the saved one: when another process
saved it, the call continues that request exactly as the process that made it would have.

The saved state holds the request's messages and names the history it was made from by
the digest of its messages (:class:`~flexamem_core.model.history.PrefixDigests`): a history
that does not start with those messages (a fork, an edit) renders afresh, as it does in one
process.

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
from .sent import SentRequest

FORMAT = 1


def encode(sent: SentRequest, digest: bytes) -> bytes:
    """The saved form of ``sent``; ``digest`` names ``sent.source[:sent.length]``."""
    outcome = sent.outcome
    state = {
        "format": FORMAT, "budget": sent.budget, "extra_tokens": sent.extra_tokens, "query": sent.query,
        "length": sent.length, "digest": digest.hex(), "verbatim_from": sent.verbatim_from,
        "old_units": sent.old_units, "messages": [m.to_dict() for m in sent.messages],
        "memory_text": outcome.memory_text, "tokens": outcome.tokens, "report": _report_fields(outcome.report),
        "records": outcome.records,
    }
    return zlib.compress(json.dumps(state, separators=(",", ":"), default=str).encode("ascii"), 1)


def decode(data: bytes, history: list[Message], digest_at: Callable[[Sequence[Message], int], bytes]) \
        -> SentRequest | None:
    """The request saved in ``data``; it continues ``history`` only when ``history`` starts with
    the messages it was made from (else it is kept as the previous request of another history,
    as one process keeps it: a fork renders afresh, its report measured against it). None for
    data this version cannot read."""
    try:
        state = json.loads(zlib.decompress(data))
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            return None
        length = int(state["length"])
        continued = 0 <= length <= len(history) and digest_at(history, length).hex() == state["digest"]
        messages = [Message.from_dict(m) for m in state["messages"]]
        records = state.get("records")  # absent from a state saved before compaction existed
        outcome = Outcome(messages, state["memory_text"], int(state["tokens"]), _report(state["report"]),
                          (int(records[0]), int(records[1])) if records else None)
        return SentRequest(int(state["budget"]), int(state["extra_tokens"]), state["query"],
                           history if continued else [], outcome, state["verbatim_from"], state["old_units"],
                           length, continued)
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
