"""Where a rendered request's stable parts end, and what a provider that caches only at marked
places reads (the second price model of ``flexamem eval``)."""

from __future__ import annotations

from flexamem_core import FlexAMem, Message
from flexamem_core.cache.breakpoints import LOOKBACK, BreakpointCache, host_marks
from flexamem_core.request.counting import count_messages
from flexamem_core.request.marker import is_marked, memory_message
from tests.conftest import flat_config
from tests.core.test_revealed import agent_history


def test_a_rendered_request_names_the_ends_of_its_fixed_prompt_and_memory(tokenizer, hashing_embedder) -> None:
    mem = FlexAMem(flat_config(agent_unit_tokens=100, budget=3000), tokenizer=tokenizer, embedder=hashing_embedder)
    history = agent_history(40)
    r = mem.render(history)
    at = next(i for i, m in enumerate(r.messages) if is_marked(m.metadata))
    assert r.cache_breakpoints() == (at - 1, at)
    assert r.messages[at - 1].text == history[1]["content"]  # the task
    short = mem.render(history[:4], namespace="short")
    assert short.passthrough and short.cache_breakpoints() == ()


def test_a_marked_provider_reads_only_prefixes_an_earlier_request_marked(tokenizer) -> None:
    s, t = Message("system", "You are an agent."), Message("user", "The task: fix the parser bug in module x.")
    steps = [Message("assistant" if k % 2 == 0 else "user", f"message {k} " * 30) for k in range(6)]
    cache = BreakpointCache(tokenizer)
    assert cache.add([s, t], host_marks([s, t])) == 0  # the first call writes [s, t]
    grown = [s, t, *steps[:2]]
    assert cache.add(grown, host_marks(grown)) == count_messages([s, t], tokenizer)  # looked back to [s, t]
    first = [s, t, memory_message("<memory>one</memory>"), *steps[2:4]]
    assert host_marks(first) == (1, 2, 4)
    assert cache.add(first, host_marks(first)) == count_messages([s, t], tokenizer)
    appended = [*first, *steps[4:6]]
    assert cache.add(appended, host_marks(appended)) == count_messages(first, tokenizer)
    # only the end marked: a new memory after [s, t] is read from [s, t] only if an earlier call marked it there
    other = BreakpointCache(tokenizer)
    other.add(grown, (len(grown) - 1,))
    changed = [s, t, memory_message("<memory>two</memory>"), *steps[2:4]]
    assert other.add(changed, (len(changed) - 1,)) == 0
    assert other.add(changed, host_marks(changed)) == count_messages(changed, tokenizer)  # the same request again


def test_a_mark_looks_back_a_bounded_number_of_messages(tokenizer) -> None:
    msgs = [Message("user" if k % 2 else "assistant", f"m{k}") for k in range(LOOKBACK + 5)]
    cache = BreakpointCache(tokenizer)
    cache.add(msgs[:2], (1,))
    assert cache.add(msgs[:LOOKBACK + 1], (LOOKBACK,)) == count_messages(msgs[:2], tokenizer)
    far = BreakpointCache(tokenizer)
    far.add(msgs[:2], (1,))
    assert far.add(msgs, (len(msgs) - 1,)) == 0  # more than LOOKBACK messages after the marked prefix
