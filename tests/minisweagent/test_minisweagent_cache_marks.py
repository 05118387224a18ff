"""Prompt-cache marks where the rendered request's stable parts end, for Anthropic models.

mini-swe-agent's litellm model marks a Claude request at its end (``set_cache_control``); the
wrapper adds marks after the fixed prompt and after the memory, in the same shape, and none
where the inner model marks nothing. What is checked is what the inner model prepares for
the API (``_prepare_messages_for_api``, the step before ``litellm.completion``)."""

from __future__ import annotations

from typing import Any

import pytest
from flexamem_minisweagent import FlexAMemModel
from minisweagent.models.litellm_model import LitellmModel
from mswea_fakes import long_history

from flexamem_core.cache.breakpoints import MAX_BREAKPOINTS

CLAUDE = "anthropic/claude-sonnet-4-5-20250929"


def marked(entry: dict[str, Any]) -> bool:
    content = entry.get("content")
    return "cache_control" in entry or (isinstance(content, list) and any("cache_control" in b for b in content))


def prepared_after_render(model: FlexAMemModel, history: list[dict[str, Any]]) -> tuple[list[dict], dict]:
    host, info = model.render(history)
    return model.inner._prepare_messages_for_api(list(host)), info


@pytest.mark.parametrize("steps", [40, 60])
def test_a_claude_request_is_marked_after_the_task_the_memory_and_at_its_end(steps) -> None:
    model = FlexAMemModel(inner=LitellmModel(model_name=CLAUDE, set_cache_control="default_end"),
                          flexamem={"budget": 3000, "mode": "auto"})
    history = long_history(steps)
    prepared, info = prepared_after_render(model, history)
    assert not info["passthrough"]
    marks = [i for i, m in enumerate(prepared) if marked(m)]
    memory = next(i for i, m in enumerate(prepared)
                  if isinstance(m.get("content"), list) and m["content"][0]["text"].startswith("<memory>"))
    assert marks == [memory - 1, memory, len(prepared) - 1] and len(marks) <= MAX_BREAKPOINTS
    assert prepared[memory - 1]["content"][0]["text"] == history[1]["content"]  # the task ends the fixed prompt
    for m in history:  # the host's messages are never marked or changed
        assert not marked(m) and isinstance(m["content"], str)


def test_a_passthrough_request_keeps_the_inner_models_one_mark() -> None:
    model = FlexAMemModel(inner=LitellmModel(model_name=CLAUDE, set_cache_control="default_end"),
                          flexamem={"budget": 100_000})
    prepared, info = prepared_after_render(model, long_history(4))
    assert info["passthrough"]
    assert [i for i, m in enumerate(prepared) if marked(m)] == [len(prepared) - 1]


def test_a_model_that_marks_nothing_gets_no_marks() -> None:
    model = FlexAMemModel(inner=LitellmModel(model_name="openai/gpt-4o", set_cache_control=None),
                          flexamem={"budget": 3000})
    prepared, info = prepared_after_render(model, long_history(40))
    assert not info["passthrough"] and not any(marked(m) for m in prepared)
