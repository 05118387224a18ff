"""A long chat through ``SimpleChatEngine`` keeps the previous exchange (issue 9, defect 4).

LlamaIndex's ``MockLLM`` answers with the prompt it got, so its replies are long (about as
long as the budget allows): the exchange before the current turn used to go into an old
unit, leaving no turn of the conversation verbatim.
"""

from __future__ import annotations

from typing import Any

from flexamem_llamaindex import FlexAMemory, config_for
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from pydantic import PrivateAttr

from flexamem_core import FlexAMem

BUDGET, TURNS = 3000, 120


class RecordingMockLLM(MockLLM):
    """LlamaIndex's MockLLM, keeping every message list it was given."""

    _received: list[Any] = PrivateAttr(default_factory=list)

    @property
    def received(self) -> list[Any]:
        return self._received

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        self._received.append(list(messages))
        return super().chat(messages, **kwargs)


def test_every_rendered_call_keeps_the_previous_exchange(hashing_embedder) -> None:
    engine = FlexAMem(config_for("chat", BUDGET), embedder=hashing_embedder)
    memory = FlexAMemory.from_defaults(budget=BUDGET, engine=engine)
    llm = RecordingMockLLM(max_tokens=None)
    chat = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
    previous = None
    rendered = 0
    for t in range(TURNS):
        question = f"Turn {t}: tell me about topic {t}, " + " ".join(f"w{t}_{k}" for k in range(15))
        reply = str(chat.chat(question).response)
        sent = [m.content or "" for m in llm.received[-1]]
        report = memory.last_render.report
        if previous is not None and not report.get("passthrough"):
            rendered += 1
            assert report["window_units"] >= 1
            assert previous[0] in sent  # the previous question, verbatim
            # the previous reply verbatim, or cut in the middle (marked) when it alone is over
            assert previous[1] in sent or report["newest_unit_cut_messages"] >= 1
            assert sent[-1] == question
        previous = (question, reply)
    assert rendered > 50
