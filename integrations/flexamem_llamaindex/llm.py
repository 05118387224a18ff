"""``FlexAMemLLM``: render the agent's whole message list, scratchpad included, before each call.

Inside one ``FunctionAgent.run()`` the assistant's tool calls and the tool results live
in the agent's scratchpad and reach memory only when the run ends, so a long tool loop
grows the LLM input unchecked. Wrapping the LLM closes that gap: before every call the
wrapper takes the list it is given, replaces the part that came from
``FlexAMemory.get`` by the memory's complete log, and renders log plus scratchpad with
agent units for the budget. The inner LLM (any ``FunctionCallingLLM``) receives the
rendered list; tools, tool choice and parsing of tool calls are delegated unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr, SerializeAsAny
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import LLM, ToolSelection

from flexamem_core import FlexAMem
from flexamem_core.host import HostRender, arender_host, check_budget, render_host

from .convert import LlamaIndexCodec
from .memory import FlexAMemory
from .presets import config_for
from .unbounded import mark_wrapped

if TYPE_CHECKING:
    from llama_index.core.tools.types import BaseTool


class FlexAMemLLM(FunctionCallingLLM):
    """Delegating LLM that renders every message list it receives through FlexA-Mem."""

    llm: SerializeAsAny[LLM] = Field(description="the real LLM that receives the rendered messages")
    memory: FlexAMemory = Field(description="the agent's FlexAMemory (store, namespace, budget)")
    budget: int | None = Field(default=None, description="budget of each call; default the memory's")

    _engine: FlexAMem | None = PrivateAttr(default=None)
    _last_render: Any = PrivateAttr(default=None)
    _renders: int = PrivateAttr(default=0)

    def __init__(self, llm: LLM, memory: FlexAMemory, budget: int | None = None, **kwargs: Any) -> None:
        if not isinstance(memory, FlexAMemory):
            raise TypeError(f"memory must be a FlexAMemory, got {type(memory).__name__}")
        super().__init__(llm=llm, memory=memory, budget=check_budget(budget),
                         callback_manager=kwargs.pop("callback_manager", None) or llm.callback_manager,
                         **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "FlexAMemLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return self.llm.metadata

    @property
    def last_render(self) -> Any:
        """The core's ``Rendered`` of the last call (``.report``, ``.tokens``, ``.passthrough``)."""
        return self._last_render

    @property
    def renders(self) -> int:
        """How many calls were rendered."""
        return self._renders

    # -- rendering ----------------------------------------------------------------------

    @property
    def engine(self) -> FlexAMem:
        """An agent-unit engine on the memory's store, with the memory engine's parts."""
        if self._engine is None:
            base = self.memory.engine
            if base.config.history == "agent":
                self._engine = base
            else:
                config = config_for("agent", base.config.budget,
                                    **{k: v for k, v in base.config.model_dump().items()
                                       if k not in ("history", "mode", "budget")})
                self._engine = FlexAMem(config, store=base.store, tokenizer=base.tokenizer,
                                        embedder=base.embedder, writer=base.writer)
        return self._engine

    @property
    def namespace(self) -> str:
        """The memory's namespace for agent memories; a sibling one under a chat memory."""
        ns = self.memory.namespace
        return ns if self.memory.config.history == "agent" else f"{ns}:tools"

    def _split(self, messages: Sequence[ChatMessage]) -> tuple[list[ChatMessage], list[ChatMessage],
                                                                list[ChatMessage]]:
        """(prefix, complete log, tail): the memory's output is swapped for its full log."""
        messages = list(messages)
        last = self.memory.last_get()
        found = _find_block(messages, last.output) if last is not None else None
        if last is not None and found is not None:
            start, length = found
            log = last.memory.chat_store.get_messages(last.memory.chat_store_key)
            return messages[:start], list(log), messages[start + length:]
        lead = 0
        while lead < len(messages) and messages[lead].role in (MessageRole.SYSTEM, MessageRole.DEVELOPER):
            lead += 1
        return messages[:lead], messages[lead:], []

    def _query(self) -> str | None:
        last = self.memory.last_get()
        return last.query if last is not None else None

    def _keep(self, result: HostRender[ChatMessage]) -> list[ChatMessage]:
        self._last_render = result.rendered
        self._renders += 1
        mark_wrapped(self.memory)
        return result.messages

    def _call(self, messages: Sequence[ChatMessage], tools: Sequence[BaseTool] | None) -> dict[str, Any]:
        """The core's arguments for one call: the memory's output swapped for the complete log."""
        prefix, log, tail = self._split(messages)
        return {"mem": self.engine, "codec": LlamaIndexCodec(prefix=len(prefix)), "messages": [*prefix, *log, *tail],
                "namespace": self.namespace, "query": self._query(), "budget": self.budget, "tools": tools}

    def render(self, messages: Sequence[ChatMessage], tools: Sequence[BaseTool] | None = None) -> list[ChatMessage]:
        """The messages the inner LLM would receive for ``messages`` (copies); ``tools`` count."""
        return self._keep(render_host(**self._call(messages, tools)))

    async def arender(self, messages: Sequence[ChatMessage],
                      tools: Sequence[BaseTool] | None = None) -> list[ChatMessage]:
        return self._keep(await arender_host(**self._call(messages, tools)))

    # -- chat: render, then delegate ------------------------------------------------------

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.llm.chat(self.render(messages, kwargs.get("tools")), **kwargs)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await self.llm.achat(await self.arender(messages, kwargs.get("tools")), **kwargs)

    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        return self.llm.stream_chat(self.render(messages, kwargs.get("tools")), **kwargs)

    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        return await self.llm.astream_chat(await self.arender(messages, kwargs.get("tools")), **kwargs)

    def chat_with_tools(self, tools: Sequence[BaseTool], user_msg: str | ChatMessage | None = None,
                        chat_history: list[ChatMessage] | None = None, **kwargs: Any) -> ChatResponse:
        history = self.render(_with_user(chat_history, user_msg), tools)
        return self._inner().chat_with_tools(tools, chat_history=history, **kwargs)

    async def achat_with_tools(self, tools: Sequence[BaseTool], user_msg: str | ChatMessage | None = None,
                               chat_history: list[ChatMessage] | None = None, **kwargs: Any) -> ChatResponse:
        history = await self.arender(_with_user(chat_history, user_msg), tools)
        return await self._inner().achat_with_tools(tools, chat_history=history, **kwargs)

    def stream_chat_with_tools(self, tools: Sequence[BaseTool], user_msg: str | ChatMessage | None = None,
                               chat_history: list[ChatMessage] | None = None,
                               **kwargs: Any) -> ChatResponseGen:
        history = self.render(_with_user(chat_history, user_msg), tools)
        return self._inner().stream_chat_with_tools(tools, chat_history=history, **kwargs)

    async def astream_chat_with_tools(self, tools: Sequence[BaseTool],
                                      user_msg: str | ChatMessage | None = None,
                                      chat_history: list[ChatMessage] | None = None,
                                      **kwargs: Any) -> ChatResponseAsyncGen:
        history = await self.arender(_with_user(chat_history, user_msg), tools)
        return await self._inner().astream_chat_with_tools(tools, chat_history=history, **kwargs)

    def _inner(self) -> FunctionCallingLLM:
        if not isinstance(self.llm, FunctionCallingLLM):
            raise TypeError(f"{type(self.llm).__name__} does not call tools; use a FunctionCallingLLM")
        return self.llm

    def _prepare_chat_with_tools(self, tools: Sequence[BaseTool], user_msg: str | ChatMessage | None = None,
                                 chat_history: list[ChatMessage] | None = None, verbose: bool = False,
                                 allow_parallel_tool_calls: bool = False, tool_required: bool = False,
                                 **kwargs: Any) -> dict[str, Any]:
        return self._inner()._prepare_chat_with_tools_compat(
            tools, user_msg=user_msg, chat_history=chat_history, verbose=verbose,
            allow_parallel_tool_calls=allow_parallel_tool_calls, tool_required=tool_required, **kwargs)

    def get_tool_calls_from_response(self, response: ChatResponse, error_on_no_tool_call: bool = True,
                                     **kwargs: Any) -> list[ToolSelection]:
        return self._inner().get_tool_calls_from_response(
            response, error_on_no_tool_call=error_on_no_tool_call, **kwargs)

    # -- completion: prompts are strings, nothing to render ----------------------------------

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.llm.complete(prompt, formatted=formatted, **kwargs)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return await self.llm.acomplete(prompt, formatted=formatted, **kwargs)

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        return self.llm.stream_complete(prompt, formatted=formatted, **kwargs)

    async def astream_complete(self, prompt: str, formatted: bool = False,
                               **kwargs: Any) -> CompletionResponseAsyncGen:
        return await self.llm.astream_complete(prompt, formatted=formatted, **kwargs)


def _with_user(chat_history: list[ChatMessage] | None, user_msg: str | ChatMessage | None) -> list[ChatMessage]:
    messages = list(chat_history or [])
    if isinstance(user_msg, str):
        messages.append(ChatMessage(role=MessageRole.USER, content=user_msg))
    elif user_msg is not None:
        messages.append(user_msg)
    return messages


def _find_block(messages: list[ChatMessage], block: list[ChatMessage]) -> tuple[int, int] | None:
    """Where the memory's last output sits in ``messages``: by identity, else by equality."""
    n = len(block)
    if n == 0 or n > len(messages):
        return None
    for same in (lambda a, b: a is b, lambda a, b: a == b):
        for start in range(len(messages) - n, -1, -1):
            if all(same(messages[start + i], block[i]) for i in range(n)):
                return start, n
    return None
