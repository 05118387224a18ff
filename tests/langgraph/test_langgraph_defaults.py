"""The budget from the model's profile, explicit budgets winning, ``token_counter=`` callables.

Real ``create_agent`` runs with langchain-core's fake chat model, given a profile the way
provider packages give one (``profile={"max_input_tokens": ...}``), and real tools.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from flexamem_langgraph import FlexAMemMiddleware, FlexAMemRenderer, LangChainRender, to_core
from flexamem_langgraph.counting import TokenCounterTokenizer
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.checkpoint.memory import InMemorySaver

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.host import FALLBACK_BUDGET, config_for_budget, window_budget


def _run(lg: SimpleNamespace, middleware: FlexAMemMiddleware, profile: dict | None, tag: str = "orion",
         ) -> tuple[list[LangChainRender], Any]:
    outcomes: list[LangChainRender] = []
    middleware.on_render = outcomes.append
    model = lg.ScriptedToolModel(responses=lg.investigation_script(tag), profile=profile)
    agent = create_agent(model, lg.TOOLS, system_prompt=lg.SYSTEM_PROMPT, middleware=[middleware],
                         checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage(lg.task_text(tag))]},
                 {"configurable": {"thread_id": tag}, "recursion_limit": 100})
    return outcomes, model


def _unset_mem(lg_tokenizer: Any, lg_embedder: Any) -> FlexAMem:
    """A memory whose config leaves the budget at its default (not chosen by the user); another
    setting given by name must not make the budget count as chosen."""
    return FlexAMem(tokenizer=lg_tokenizer, embedder=lg_embedder, warm="lazy")


def _check_calls(lg: SimpleNamespace, outcomes: list[LangChainRender], model: Any, mem: FlexAMem,
                 budget: int) -> None:
    assert outcomes and {o.report["budget"] for o in outcomes} == {budget}
    assert any(not o.rendered.passthrough for o in outcomes), "the run must outgrow the budget"
    schemas = lg.tool_tokens(mem, lg.TOOLS)
    for call in model.received:  # what the model got, system prompt included, plus the tool schemas
        lg.check_structure(call)
        assert mem.count_messages(to_core(call).messages, extra_tokens=schemas) <= int(budget * 0.95)


def test_the_budget_is_a_share_of_the_models_input_window(lg, lg_tokenizer, lg_embedder) -> None:
    mem = _unset_mem(lg_tokenizer, lg_embedder)
    middleware = FlexAMemMiddleware(mem)
    outcomes, model = _run(lg, middleware, {"max_input_tokens": 4000})
    _check_calls(lg, outcomes, model, mem, window_budget(4000))
    assert middleware.mem is mem and mem.config == FlexAMemConfig()  # the user's memory is used as it is


def test_a_fraction_budget_reads_the_profile_like_summarization_middleware(lg, lg_tokenizer, lg_embedder) -> None:
    mem = _unset_mem(lg_tokenizer, lg_embedder)
    outcomes, model = _run(lg, FlexAMemMiddleware(mem, budget=("fraction", 0.5)), {"max_input_tokens": 5000})
    _check_calls(lg, outcomes, model, mem, 2500)


def test_an_explicit_budget_wins_over_the_profile(lg, lg_tokenizer, lg_embedder, make_mem) -> None:
    mem = _unset_mem(lg_tokenizer, lg_embedder)
    outcomes, model = _run(lg, FlexAMemMiddleware(mem, budget=3200), {"max_input_tokens": 100_000})
    _check_calls(lg, outcomes, model, mem, 3200)
    configured = make_mem(budget=2800)  # a FlexAMem whose config sets the budget counts as explicit
    outcomes, model = _run(lg, FlexAMemMiddleware(configured), {"max_input_tokens": 100_000}, tag="vega")
    _check_calls(lg, outcomes, model, configured, 2800)


def test_no_budget_and_no_profile_uses_the_default_with_one_warning(lg, lg_tokenizer, lg_embedder,
                                                                     caplog) -> None:
    from flexamem_core import logs

    logs._warned.discard("langgraph-default-budget")
    caplog.set_level(logging.WARNING, logger="flexamem")
    mem = _unset_mem(lg_tokenizer, lg_embedder)
    middleware = FlexAMemMiddleware(mem)
    outcomes, _ = _run(lg, middleware, None)
    _run(lg, middleware, None, tag="vega")
    warnings = [r for r in caplog.records if r.name.startswith("flexamem") and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "no budget given" in warnings[0].getMessage()
    assert {o.report["budget"] for o in outcomes} == {FALLBACK_BUDGET}


def test_a_fraction_without_a_profile_and_bad_budgets_fail_clearly(lg, lg_tokenizer, lg_embedder) -> None:
    mem = _unset_mem(lg_tokenizer, lg_embedder)
    with pytest.raises(ValueError, match="max_input_tokens"):
        _run(lg, FlexAMemMiddleware(mem, budget=("fraction", 0.5)), None)
    for bad in (0, -5, ("fraction", 0), ("fraction", 1.5), ("tokens", 10), True):
        with pytest.raises(ValueError, match="budget"):
            FlexAMemMiddleware(mem, budget=bad)


def test_a_langchain_token_counter_counts_every_call(lg) -> None:
    middleware = FlexAMemMiddleware(token_counter=count_tokens_approximately, budget=2500)
    assert isinstance(middleware.mem.tokenizer, TokenCounterTokenizer)
    outcomes, model = _run(lg, middleware, None)
    assert any(not o.rendered.passthrough for o in outcomes)
    schemas = lg.tool_tokens(middleware.mem, lg.TOOLS)  # counted by the same counter
    for call, outcome in zip(model.received, outcomes, strict=True):
        lg.check_structure(call)
        assert outcome.rendered.tokens <= int(2500 * 0.95)
        # The user's own counter on the messages as sent (its per-message overhead and role
        # names and tool-call JSON included) stays within the budget and within 3% of ours.
        independent = count_tokens_approximately(call) + schemas
        assert independent <= 2500
        assert abs(independent - outcome.rendered.tokens) <= 0.03 * independent + 2 * len(call)
    with pytest.raises(ValueError, match="not both"):
        FlexAMemMiddleware(middleware.mem, token_counter=count_tokens_approximately)


def test_token_counter_split_keeps_every_character_within_the_limit() -> None:
    tk = TokenCounterTokenizer(count_tokens_approximately)
    text = "alpha beta gamma\n" * 200 + "x" * 900
    parts = tk.split(text, 50)
    assert "".join(parts) == text
    assert all(tk.count(p) <= 50 for p in parts) and len(parts) > 10


def test_the_renderer_takes_the_budget_from_its_model(lg, lg_tokenizer, lg_embedder) -> None:
    mem = _unset_mem(lg_tokenizer, lg_embedder)
    model = lg.ScriptedToolModel(responses=[], profile={"max_input_tokens": 2000})
    renderer = FlexAMemRenderer(mem, model=model, system_prompt=lg.SYSTEM_PROMPT, tools=lg.TOOLS)
    outcomes: list[LangChainRender] = []
    renderer.on_render = outcomes.append
    history = [HumanMessage(lg.task_text("orion"))]
    renderer.render(history, namespace="renderer")
    assert outcomes[0].report["budget"] == window_budget(2000)
    assert renderer.mem is mem and mem.config == FlexAMemConfig()  # the user's memory, as it is
    own = FlexAMemRenderer(model=model, on_render=outcomes.append)  # the renderer makes its memory
    own.render(history, namespace="renderer-own")
    assert outcomes[1].report["budget"] == own.mem.config.budget == window_budget(2000)
    assert own.mem.config == config_for_budget(window_budget(2000))  # unit sizes capped for that budget
    assert own.mem.config.tuning.agent_unit_tokens < FlexAMemConfig().tuning.agent_unit_tokens
