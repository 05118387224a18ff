"""Shared pieces of the LangGraph adapter tests: an offline tool-calling fake model, real
tools with verbose outputs, a scripted investigation long enough to exceed a small budget,
and a checker for the message rules every model input must obey."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from flexamem_langgraph import to_core
from flexamem_langgraph.convert import CODEC, system_tokens
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from flexamem_core import FlexAMem, FlexAMemConfig, InMemoryStore
from flexamem_core.host import extra_tokens_of

BUDGET = 3000
SYSTEM_PROMPT = "You are a careful repository investigator. Use the tools, then answer briefly."


class ScriptedToolModel(FakeMessagesListChatModel):
    """langchain-core's list fake, made to accept ``bind_tools`` and to record its inputs.

    Each reply is a fresh copy of the scripted message, so LangChain gives it a new run id
    and the script itself is never mutated.
    """

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.received.append(list(messages))
        result = super()._generate(messages, stop, run_manager, **kwargs)
        reply = result.generations[0].message.model_copy(deep=True)
        return ChatResult(generations=[ChatGeneration(message=reply)])


def file_text(path: str) -> str:
    """A deterministic, verbose file listing (about 450 tokens) with one distinctive fact."""
    stem = path.replace("/", "_").replace(".", "_")
    lines = [f"# file {path}: configuration and helpers of the {stem} component"]
    for i in range(1, 31):
        lines.append(f"{path}:{i:02d}: {stem}_setting_{i} = {(i * 7919 + len(path) * 31) % 100003}"
                     f"  # tuned value for {stem} stage {i}")
    lines.append(f"{path}:31: SECRET_MARKER_{stem.upper()} = 'kept-verbatim-{len(path) * 97}'")
    return "\n".join(lines)


def suite_log(suite: str) -> str:
    """A verbose test-run log (about 400 tokens) with a distinctive failure line."""
    lines = [f"$ pytest tests/{suite} -q"]
    for i in range(1, 26):
        lines.append(f"tests/{suite}/test_case_{i:02d}.py::test_{suite}_{i} PASSED in {i * 0.013:.3f}s")
    lines.append(f"tests/{suite}/test_connect.py::test_{suite}_connect FAILED")
    lines.append(f"E   ConnectionRefusedError: {suite}-db-primary:5432 refused the connection")
    lines.append("1 failed, 25 passed in 0.91s")
    return "\n".join(lines)


@tool
def read_file(path: str) -> str:
    """Read a file of the repository and return its full text."""
    return file_text(path)


@tool
def run_tests(suite: str) -> str:
    """Run one test suite and return the complete log."""
    return suite_log(suite)


TOOLS = [read_file, run_tests]


def _call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _one(name: str, args: dict[str, Any], call_id: str, content: str = "") -> AIMessage:
    return AIMessage(content=content, tool_calls=[_call(name, args, call_id)])


def investigation_script(tag: str) -> list[AIMessage]:
    """Eleven model replies: ten tool-calling turns (one with three parallel calls), then an answer."""
    paths = [f"{tag}/config/db.yaml", f"{tag}/src/client.py", f"{tag}/src/retry.py",
             f"{tag}/src/pool.py", f"{tag}/docs/deploy.md", f"{tag}/src/settings.py",
             f"{tag}/src/models.py", f"{tag}/src/views.py"]
    replies: list[AIMessage] = [
        AIMessage(content="Reading the database configuration first.",
                  tool_calls=[_call("read_file", {"path": paths[0]}, f"{tag}-c1")]),
        AIMessage(content="", tool_calls=[_call("run_tests", {"suite": f"{tag}payments"}, f"{tag}-c2")]),
        AIMessage(content="Reading three modules in parallel.",
                  tool_calls=[_call("read_file", {"path": paths[1]}, f"{tag}-c3a"),
                              _call("read_file", {"path": paths[2]}, f"{tag}-c3b"),
                              _call("read_file", {"path": paths[3]}, f"{tag}-c3c")]),
    ]
    for n, path in enumerate(paths[4:], start=4):
        replies.append(_one("read_file", {"path": path}, f"{tag}-c{n}"))
    replies.append(_one("run_tests", {"suite": f"{tag}billing"}, f"{tag}-c8"))
    replies.append(_one("read_file", {"path": paths[2]}, f"{tag}-c9", "Checking the retry module again."))
    replies.append(_one("run_tests", {"suite": f"{tag}payments"}, f"{tag}-c10"))
    replies.append(AIMessage(content=f"Done: the {tag} client uses port 5432 while the config differs."))
    return replies


def task_text(tag: str) -> str:
    return f"Find out why the {tag} payment service cannot reach its database and report the port it uses."


def check_structure(messages: Sequence[BaseMessage]) -> None:
    """The message rules: one system message, first; every tool call answered right after its
    assistant message (parallel calls too); no orphan tool results; the last message is not
    an assistant message with unanswered calls."""
    systems = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage)]
    assert systems in ([], [0]), f"system messages at {systems}"
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, ToolMessage):
            raise AssertionError(f"orphan tool result {m.tool_call_id} at {i}")
        if isinstance(m, AIMessage) and m.tool_calls:
            wanted = {c["id"] for c in m.tool_calls}
            j = i + 1
            got: set[str] = set()
            while j < len(messages) and isinstance(messages[j], ToolMessage):
                assert messages[j].tool_call_id in wanted, f"tool result {messages[j].tool_call_id} not asked"
                got.add(messages[j].tool_call_id)
                j += 1
            assert got == wanted, f"calls {sorted(wanted - got)} of message {i} unanswered"
            i = j
            continue
        i += 1


def memory_messages(messages: Sequence[BaseMessage]) -> list[HumanMessage]:
    return [m for m in messages if isinstance(m, HumanMessage) and m.text.startswith("<memory>")]


def tool_outputs(messages: Sequence[BaseMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolMessage)]


def snapshot(messages: Sequence[BaseMessage]) -> str:
    """A deep, comparable dump of messages (to prove they were not mutated)."""
    return json.dumps([m.model_dump() for m in messages], sort_keys=True, default=str)


def check_run(received: Sequence[Sequence[BaseMessage]], state: Sequence[BaseMessage], mem: FlexAMem,
              tag: str, *, other_tag: str | None = None, system_prompt: str | None = SYSTEM_PROMPT,
              extra_tokens: int = 0) -> str:
    """Assert one scripted investigation went right end to end; return the last memory text.

    - the graph state is complete (every message, every tool output verbatim, no memory message);
    - every model input obeys the message rules and fits B_bar, counted independently here;
    - once the history outgrew the budget, the model got one ``<memory>`` message right after the
      system prompt and the task, and not the full history;
    - the last memory holds the timeline (the first action's path), and the memories of the
      run show exact strings of tool outputs that are no longer in their call's window (what
      they revealed, or their text; not necessarily in the last call);
    - nothing of another thread (``other_tag``) appears.
    """
    script = investigation_script(tag)
    assert len(received) == len(script), "one model call per scripted reply"
    outputs = tool_outputs(state)
    assert len(state) == 1 + len(script) + sum(len(r.tool_calls) for r in script)
    assert isinstance(state[0], HumanMessage) and state[0].text == task_text(tag)
    assert outputs[0] == file_text(f"{tag}/config/db.yaml") and outputs[-1] == suite_log(f"{tag}payments")
    assert not memory_messages(state), "the memory message must never enter the graph state"
    assert mem.count_messages(to_core(state).messages) > mem.config.budget, "history must outgrow the budget"
    b_bar = mem.config.effective_budget
    saw_memory = False
    for k, call in enumerate(received):
        check_structure(call)
        if k == 0:
            assert call[-1].text == task_text(tag), "the current turn is never dropped"
        else:
            assert isinstance(call[-1], ToolMessage), "the current turn is never dropped"
            assert call[-1].tool_call_id == script[k - 1].tool_calls[-1]["id"], "input is never stale"
        core = to_core(call).messages
        # ``extra_tokens`` already holds the system prompt (as the renderer counts it): count it once.
        counted = core[1:] if system_prompt is not None and core and core[0].role == "system" else core
        assert mem.count_messages(counted, extra_tokens=extra_tokens) <= b_bar
        if system_prompt is not None:
            assert isinstance(call[0], SystemMessage) and call[0].text == system_prompt
        mems = memory_messages(call)
        assert len(mems) <= 1
        if saw_memory:
            assert mems, "once memory starts it is rendered on every later call"
        if mems:
            saw_memory = True
            task_at = next(i for i, m in enumerate(call) if m.text == task_text(tag))
            assert call[task_at + 1] is mems[0]
    last = list(received[-1])
    [memory] = memory_messages(last)
    assert len(tool_outputs(last)) < len(outputs), "the model must not get the full history"
    assert outputs[0] not in [m.text for m in last], "the oldest tool output left the window"
    text = memory.text
    assert f"{tag}/config/db.yaml" in text, "the timeline keeps the first action"
    # exact strings of old tool outputs (their words of 12 characters or more) that the memory
    # shows while the outputs are out of the call's window: what they revealed, or their text
    recovered = [word for call in received for shown in memory_messages(call)
                 for out in outputs if out not in "\n".join(tool_outputs(call))
                 for word in set(out.split()) if len(word) >= 12 and word in shown.text]
    assert recovered, "memory must keep exact details of tool outputs outside the window"
    if other_tag is not None:
        assert other_tag not in text and all(other_tag not in m.text for m in last)
    return text


def tool_tokens(mem: FlexAMem, tools: Sequence[Any]) -> int:
    """Tokens of the tool schemas, as the adapter counts them (the core's count of its codec's schemas)."""
    return extra_tokens_of(mem, CODEC, tools)


def extra_tokens(mem: FlexAMem, system_prompt: str | None, tools: Sequence[Any]) -> int:
    """What the model node sends apart from the history: its system prompt and the tool schemas."""
    return system_tokens(mem, system_prompt) + tool_tokens(mem, tools)


@pytest.fixture(scope="session")
def lg_tokenizer(request: pytest.FixtureRequest) -> Any:
    """The session tokenizer of tests/conftest.py when it exists, else our own."""
    try:
        return request.getfixturevalue("tokenizer")
    except pytest.FixtureLookupError:
        from flexamem_core.request.tokens import default_tokenizer

        return default_tokenizer()


@pytest.fixture(scope="session")
def lg_embedder(request: pytest.FixtureRequest) -> Any:
    """The session embedder of tests/conftest.py when it exists, else one for this session."""
    try:
        return request.getfixturevalue("embedder")
    except pytest.FixtureLookupError:
        from flexamem_core.index.embeddings import default_embedder

        return default_embedder()


@pytest.fixture
def make_mem(lg_tokenizer: Any, lg_embedder: Any) -> Callable[..., FlexAMem]:
    """Build a FlexAMem on the shared tokenizer and embedder."""
    def make(budget: int = BUDGET, store: Any = None, **settings: Any) -> FlexAMem:
        return FlexAMem(FlexAMemConfig(budget=budget, **settings),
                        store=store if store is not None else InMemoryStore(),
                        tokenizer=lg_tokenizer, embedder=lg_embedder)
    return make


@pytest.fixture
def make_model() -> Callable[[str], ScriptedToolModel]:
    def make(tag: str) -> ScriptedToolModel:
        return ScriptedToolModel(responses=investigation_script(tag))
    return make


@pytest.fixture(scope="session")
def lg() -> SimpleNamespace:
    """The helpers above, for test modules (test files do not import conftest)."""
    return SimpleNamespace(
        BUDGET=BUDGET, SYSTEM_PROMPT=SYSTEM_PROMPT, TOOLS=TOOLS, ScriptedToolModel=ScriptedToolModel,
        file_text=file_text, suite_log=suite_log, investigation_script=investigation_script,
        task_text=task_text, check_structure=check_structure, memory_messages=memory_messages,
        tool_outputs=tool_outputs, snapshot=snapshot, check_run=check_run, tool_tokens=tool_tokens,
        extra_tokens=extra_tokens,
    )
