"""Message rules of a render through the LangChain adapter, as hypothesis properties over
random tool-calling histories: pairing (parallel calls too), no orphan results, one system
message first, the current turn kept, host messages untouched and returned as the same
objects, the budget kept, and the memory message deterministic."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from flexamem_langgraph import MEMORY_MESSAGE_ID, render_langchain, to_core
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from flexamem_core import FlexAMem, FlexAMemConfig

WORDS = ("alpha", "beta", "gamma", "delta", "error", "value", "port", "config", "retry", "pool", "client",
         "server", "request", "timeout", "cache", "index", "token", "budget", "memory", "note", "unit",
         "piece", "record")


@st.composite
def histories(draw: st.DrawFn) -> list[BaseMessage]:
    def text(lo: int, hi: int) -> str:
        n = draw(st.integers(lo, hi))
        return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n)))

    out: list[BaseMessage] = []
    if draw(st.booleans()):
        out.append(SystemMessage("You are a test agent.", id="sys"))
    out.append(HumanMessage("task: " + text(3, 12), id="task"))
    for s in range(draw(st.integers(2, 16))):
        kind = draw(st.sampled_from(["tools", "tools", "say", "user"]))
        if kind == "user":
            out.append(HumanMessage(text(2, 20), id=f"u{s}"))
        elif kind == "say":
            out.append(AIMessage(text(2, 30), id=f"a{s}"))
        else:
            n = draw(st.integers(1, 3))
            calls = [{"name": "lookup", "args": {"q": text(1, 3)}, "id": f"c{s}-{k}"} for k in range(n)]
            out.append(AIMessage(text(0, 10), tool_calls=calls, id=f"a{s}"))
            for k in range(n):
                out.append(ToolMessage("\n".join(text(5, 30) for _ in range(draw(st.integers(2, 12)))),
                                       tool_call_id=f"c{s}-{k}", id=f"t{s}-{k}"))
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories(), budget=st.integers(800, 2000), extra=st.integers(0, 150))
def test_property_render_keeps_the_message_rules(lg: SimpleNamespace, lg_tokenizer: Any, hashing_embedder: Any,
                                                 history: list[BaseMessage], budget: int, extra: int) -> None:
    # The rules are structural: a model-free embedder lets hypothesis try many more histories.
    mem = FlexAMem(FlexAMemConfig(budget=budget), tokenizer=lg_tokenizer, embedder=hashing_embedder)
    before = lg.snapshot(history)
    first = render_langchain(mem, history, namespace="rules", extra_tokens=extra)
    again = render_langchain(mem, history, namespace="rules", extra_tokens=extra)
    out = first.messages
    assert lg.snapshot(history) == before, "host messages are never mutated"
    lg.check_structure(out)
    assert [m.text for m in again.messages] == [m.text for m in out], "deterministic render"
    counted = mem.count_messages(to_core(out).messages, extra_tokens=extra)
    assert counted == first.rendered.tokens <= mem.config.effective_budget
    originals = {id(m) for m in history}
    memory = [m for m in out if m.id == MEMORY_MESSAGE_ID]
    assert len(memory) <= 1
    event("passthrough" if first.rendered.passthrough else "rendered with memory" if memory else "rendered")
    if first.rendered.passthrough:
        assert all(a is b for a, b in zip(out, history, strict=True))
        return
    # Fixed prompt first, then the memory, then the window in history order.
    head = [m for m in history if m.id in ("sys", "task")]
    assert out[:len(head)] == head and all(a is b for a, b in zip(out, head, strict=False))
    window = [m for m in out[len(head):] if m.id != MEMORY_MESSAGE_ID]
    kept = [m for m in window if id(m) in originals]
    positions = [next(i for i, h in enumerate(history) if h is m) for m in kept]
    assert positions == sorted(positions), "the window keeps history order"
    last = history[-1]
    if id(last) in {id(m) for m in out}:
        assert out[-1] is last, "the current turn comes last"
    else:  # the newest output alone was too large: a marked, shortened copy takes its place
        assert out[-1].id == last.id and "omitted by FlexA-Mem" in out[-1].text
    if memory:
        assert memory[0].text.startswith("<memory>") and isinstance(memory[0], HumanMessage)
