"""Generated histories: the library never counts a request more than 1% below the provider's JSON.

Each rendered request is serialised as chat-completions JSON (``tests.wire_count``: messages
with names, tool calls whose ``arguments`` are JSON strings, tool results with their ids,
and a ``tools`` list) and counted by the cookbook rule; the library's ``r.tokens``, with the
schemas counted by :func:`flexamem_core.host.tool_schema_tokens` as ``extra_tokens``, is
compared with it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flexamem_core import BudgetError, FlexAMem, FlexAMemConfig
from flexamem_core.host import tool_schema_tokens

from ..wire_count import core_to_wire, request_tokens, shortfall
from .strategies import agent_history, conversation, text

PROPS = settings(deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def tool_schema(draw) -> dict:
    """A function schema as ``bind_tools`` or ``to_openai_tool`` writes one."""
    names = draw(st.lists(st.sampled_from(["path", "query", "n", "mode", "pattern", "ünïcode"]), min_size=0,
                          max_size=4, unique=True))
    return {"type": "function", "function": {
        "name": draw(st.sampled_from(["read_file", "run_tests", "search", "bash"])),
        "description": draw(text(0, 40)),
        "parameters": {"type": "object", "properties": {n: {"type": "string", "description": draw(text(0, 8))}
                                                        for n in names}, "required": names[:1]}}}


def _check(r, tools: list[dict], budget: int) -> None:
    independent = request_tokens([core_to_wire(m) for m in r.messages], tools) if r.messages else 0
    assert shortfall(r.tokens, independent) <= 0.01, (r.tokens, independent)
    assert independent <= budget


@PROPS
@given(history=agent_history(), budget=st.integers(300, 9000), tools=st.lists(tool_schema(), max_size=4),
       stable=st.booleans())
def test_agent_requests_are_never_counted_low(history, budget, tools, stable, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=budget, cache_stable=stable), tokenizer=tokenizer,
                   embedder=hashing_embedder)
    extra = tool_schema_tokens(tools, tokenizer)
    for end in sorted({len(history) // 2, len(history)}):  # two calls of one thread
        try:
            r = mem.render(history[:end], extra_tokens=extra)
        except BudgetError:
            continue
        _check(r, tools, budget)


@PROPS
@given(history=conversation(), budget=st.integers(300, 6000))
def test_reader_requests_are_never_counted_low(history, budget, tokenizer, hashing_embedder):
    mem = FlexAMem(FlexAMemConfig(budget=budget, history="reader"), tokenizer=tokenizer, embedder=hashing_embedder)
    try:
        r = mem.render(history)
    except BudgetError:
        return
    _check(r, [], budget)
