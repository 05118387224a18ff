"""``FlexAMemory``: a LlamaIndex memory that renders FlexA-Mem for every ``get``.

It drops in wherever ``ChatMemoryBuffer`` goes (``FunctionAgent``, ``AgentWorkflow``,
``SimpleChatEngine``, ``CondensePlusContextChatEngine``). The verbatim chat log lives in
a LlamaIndex chat store, exactly as in ``ChatMemoryBuffer``, so ``get_all`` is always the
complete history; ``get`` renders that log for the budget: fixed prompt, one
``<memory>`` message (timeline plus recovered detail) and the recent messages unchanged.

Serialised (``to_dict``, or inside a workflow ``Context``), it is a handle: namespace,
FlexA-Mem config, store URL and the chat store. Reloading reopens the store by URL
(:func:`flexamem_core.open_store`) and the engine of that store, so an agent
restored from a saved context keeps its memory.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_serializer, field_validator
from llama_index.core.llms.llm import LLM
from llama_index.core.memory.types import BaseChatStoreMemory
from llama_index.core.storage.chat_store import BaseChatStore, SimpleChatStore
from llama_index.core.storage.chat_store.loading import RECOGNIZED_CHAT_STORES

from flexamem_core import Embedder, FlexAMem, FlexAMemConfig, RecordWriter, Store, Tokenizer
from flexamem_core.host import HostRender, arender_host, check_budget, render_host
from flexamem_core.request.counting import PER_MESSAGE
from flexamem_core.stores import check_namespace, store_url

from .convert import LlamaIndexCodec, copy_messages
from .engines import engine_for, register_engine
from .presets import Kind, config_for, default_budget
from .unbounded import check_loop


class FlexAMemory(BaseChatStoreMemory):
    """LlamaIndex memory backed by FlexA-Mem: complete log, budgeted render per call."""

    namespace: str = Field(default="default", description="FlexA-Mem namespace (thread / tenant)")
    store_url: str = Field(description="where the FlexA-Mem store reopens from (memory://, sqlite:///...)")
    config: FlexAMemConfig = Field(description="FlexA-Mem settings, budget included")

    _engine: FlexAMem | None = PrivateAttr(default=None)
    _last_render: Any = PrivateAttr(default=None)

    @field_validator("namespace")
    @classmethod
    def _valid_namespace(cls, value: str) -> str:
        return check_namespace(value)

    @field_serializer("chat_store")
    def serialize_courses_in_order(self, chat_store: BaseChatStore) -> dict:
        """Same name as the base class's serializer, which it replaces (see ``dump_chat_store``)."""
        return dump_chat_store(chat_store)

    @classmethod
    def class_name(cls) -> str:
        return "FlexAMemory"

    @classmethod
    def from_defaults(  # type: ignore[override]
        cls,
        chat_history: list[ChatMessage] | None = None,
        llm: LLM | None = None,
        *,
        namespace: str = "default",
        kind: Kind = "chat",
        budget: int | None = None,
        token_limit: int | None = None,
        config: FlexAMemConfig | None = None,
        store: Store | str | None = None,
        engine: FlexAMem | None = None,
        tokenizer: Tokenizer | None = None,
        embedder: Embedder | None = None,
        writer: RecordWriter | None = None,
        chat_store: BaseChatStore | None = None,
        chat_store_key: str | None = None,
        **config_overrides: Any,
    ) -> FlexAMemory:
        """Build a memory the way ``ChatMemoryBuffer.from_defaults`` is built.

        ``budget`` (or its ``ChatMemoryBuffer`` name ``token_limit``) is the token budget
        of what ``get`` returns; without one it follows the rule every adapter shares, from
        ``llm.metadata.context_window``, else the shared fallback with a WARNING (once). A
        budget of 0 or less is an error. ``kind`` picks the preset (``"chat"``: reader units;
        ``"agent"``: agent units), whose unit sizes the shared rule caps for the budget;
        ``config`` replaces the preset entirely. ``store`` is a Store object or a store URL; ``engine`` is a
        ready ``FlexAMem`` (its store and parts are used).
        """
        check_namespace(namespace)
        if budget is not None and token_limit is not None and budget != token_limit:
            raise ValueError("pass budget or token_limit, not two different values")
        budget = check_budget(budget if budget is not None else token_limit, "budget (token_limit)")
        if config is None:
            if budget is None:
                budget = default_budget(llm)
            config = config_for(kind, budget, **config_overrides)
        elif config_overrides or budget is not None:
            config = FlexAMemConfig(**{**config.model_dump(), **config_overrides,
                                       **({"budget": budget} if budget is not None else {})})
        if engine is not None:
            if store is not None or any(p is not None for p in (tokenizer, embedder, writer)):
                raise ValueError("pass engine, or store/tokenizer/embedder/writer, not both")
            url = store_url(engine.store)
            if engine.config != config:
                engine = FlexAMem(config, store=engine.store, tokenizer=engine.tokenizer,
                                  embedder=engine.embedder, writer=engine.writer)
            register_engine(url, engine)
        else:
            url = store if isinstance(store, str) else store_url(store) if store is not None else None
            url = url or url_for_new_memory_store()
            engine = engine_for(url, config, tokenizer=tokenizer, embedder=embedder, writer=writer)
        key = chat_store_key or namespace
        chat_store = chat_store or SimpleChatStore()
        if chat_history is not None:
            chat_store.set_messages(key, copy_messages(chat_history))
        memory = cls(namespace=namespace, store_url=url, config=config, chat_store=chat_store,
                     chat_store_key=key)
        memory._engine = engine
        return memory

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> FlexAMemory:  # type: ignore[override]
        """Reload a handle: reopen the store by URL and the chat store from its dump."""
        data = {k: v for k, v in {**data, **kwargs}.items() if k != "class_name"}
        if isinstance(data.get("chat_store"), dict):
            data["chat_store"] = load_any_chat_store(data["chat_store"])
        return cls(**data)

    def to_string(self) -> str:
        return self.to_json()

    @classmethod
    def from_string(cls, json_str: str) -> FlexAMemory:
        import json

        return cls.from_dict(json.loads(json_str))

    # -- the engine -------------------------------------------------------------------

    @property
    def engine(self) -> FlexAMem:
        """The shared FlexA-Mem engine of this memory's store and config."""
        if self._engine is None:
            self._engine = engine_for(self.store_url, self.config)
        return self._engine

    @property
    def budget(self) -> int:
        return self.config.budget

    @property
    def token_limit(self) -> int:
        """``ChatMemoryBuffer``'s name for the budget (read-only: the config is frozen)."""
        return self.config.budget

    @property
    def tokenizer_fn(self) -> Any:
        """Token ids of a text, for chat engines that measure their prefix messages with it."""
        tokenizer = self.engine.tokenizer
        encoding = getattr(tokenizer, "encoding", None)
        if encoding is not None and hasattr(encoding, "encode_ordinary"):
            return encoding.encode_ordinary
        return lambda text: [0] * tokenizer.count(text)

    @property
    def last_render(self) -> Any:
        """The core's ``Rendered`` of the last ``get`` (``.report`` says what was shown and why)."""
        return self._last_render

    @property
    def handle_key(self) -> tuple[str, str, str]:
        """What identifies this memory across copies: store URL, namespace, chat store key."""
        return self.store_url, self.namespace, self.chat_store_key

    def last_get(self) -> LastGet | None:
        """The last ``get`` of this memory or of any copy of its handle (a restored context
        holds a new instance of the same memory); ``FlexAMemLLM`` reads it."""
        with _last_lock:
            return _last_gets.get(self.handle_key)

    # -- reading ----------------------------------------------------------------------

    def get_all(self) -> list[ChatMessage]:
        """The complete chat log (copies)."""
        return copy_messages(self.chat_store.get_messages(self.chat_store_key))

    async def aget_all(self) -> list[ChatMessage]:
        return copy_messages(await self.chat_store.aget_messages(self.chat_store_key))

    def get(self, input: str | None = None, initial_token_count: int = 0,
            **kwargs: Any) -> list[ChatMessage]:
        """The log rendered for the budget; ``input`` is the query, ``initial_token_count``
        the text tokens of what the caller puts before it (a system prompt), counted in the
        budget with the framing of the message that carries them."""
        log = self.chat_store.get_messages(self.chat_store_key)
        return self._keep(render_host(self.engine, LlamaIndexCodec(), log, namespace=self.namespace,
                                      query=_query(input), extra_tokens=prefix_tokens(initial_token_count)), input)

    async def aget(self, input: str | None = None, initial_token_count: int = 0,
                   **kwargs: Any) -> list[ChatMessage]:
        log = await self.chat_store.aget_messages(self.chat_store_key)
        return self._keep(await arender_host(self.engine, LlamaIndexCodec(), log, namespace=self.namespace,
                                             query=_query(input), extra_tokens=prefix_tokens(initial_token_count)),
                          input)

    def _keep(self, result: HostRender[ChatMessage], input: str | None) -> list[ChatMessage]:
        self._last_render = result.rendered
        with _last_lock:
            _last_gets[self.handle_key] = LastGet(self, list(result.messages), _query(input))
        return result.messages

    # -- writing ----------------------------------------------------------------------

    def put(self, message: ChatMessage) -> None:
        self.chat_store.add_message(self.chat_store_key, message.model_copy(deep=True))

    async def aput(self, message: ChatMessage) -> None:
        await self.chat_store.async_add_message(self.chat_store_key, message.model_copy(deep=True))

    def put_messages(self, messages: list[ChatMessage]) -> None:
        check_loop(self, messages)
        for message in messages:
            self.put(message)

    async def aput_messages(self, messages: list[ChatMessage]) -> None:
        check_loop(self, messages)
        for message in messages:
            await self.aput(message)

    def set(self, messages: list[ChatMessage]) -> None:
        """Replace the log; FlexA-Mem's store keeps old units (a changed history forks a new chain)."""
        self.chat_store.set_messages(self.chat_store_key, copy_messages(messages))

    async def aset(self, messages: list[ChatMessage]) -> None:
        await self.chat_store.aset_messages(self.chat_store_key, copy_messages(messages))

    def reset(self) -> None:
        """Empty the log; the append-only FlexA-Mem store is left as it is."""
        self.chat_store.delete_messages(self.chat_store_key)
        self._forget()

    async def areset(self) -> None:
        await self.chat_store.adelete_messages(self.chat_store_key)
        self._forget()

    def _forget(self) -> None:
        with _last_lock:
            _last_gets.pop(self.handle_key, None)


@dataclass(frozen=True)
class LastGet:
    """The last ``get`` of a memory handle: which instance, what it returned, for which query."""

    memory: FlexAMemory
    output: list[ChatMessage]
    query: str | None


_last_lock = threading.Lock()
_last_gets: dict[tuple[str, str, str], LastGet] = {}


def url_for_new_memory_store() -> str:
    """A fresh in-process ``InMemoryStore`` and its ``memory://`` URL."""
    from flexamem_core import InMemoryStore

    return store_url(InMemoryStore())


def prefix_tokens(initial_token_count: int) -> int:
    """What the messages a caller puts before the memory's output cost, from LlamaIndex's
    ``initial_token_count``: engines pass the tokens of those messages' text only
    (``SimpleChatEngine``: its system prompt), so the message carrying them adds its framing."""
    if isinstance(initial_token_count, int) and not isinstance(initial_token_count, bool) and initial_token_count > 0:
        return initial_token_count + PER_MESSAGE
    return initial_token_count


def _query(input: Any) -> str | None:
    if input is None:
        return None
    text = input if isinstance(input, str) else str(input)
    return text if text.strip() else None


def dump_chat_store(chat_store: BaseChatStore) -> dict[str, Any]:
    """A chat store as a JSON-ready dict with its ``class_name``.

    ``SimpleChatStore`` is dumped message by message: its own serializer fails under
    pydantic 2.13 (llama-index-core 0.14.25's ``chat_message_serialization`` passes the
    serialization info where pydantic expects an index key), which also breaks
    ``ChatMemoryBuffer.to_dict``.
    """
    if type(chat_store) is SimpleChatStore:
        return {"store": {key: [m.model_dump(mode="json") for m in messages]
                          for key, messages in chat_store.store.items()},
                "class_name": chat_store.class_name()}
    data = chat_store.model_dump()
    data["class_name"] = chat_store.class_name()
    return data


def load_any_chat_store(data: dict[str, Any]) -> BaseChatStore:
    """Rebuild a chat store from its dump: LlamaIndex's own loader, then any imported subclass."""
    name = data.get("class_name")
    if name in RECOGNIZED_CHAT_STORES:
        return RECOGNIZED_CHAT_STORES[name].from_dict(data)
    pending = list(BaseChatStore.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        try:
            if cls.class_name() == name:
                return cls.from_dict(data)
        except NotImplementedError:
            continue
    raise ValueError(f"cannot rebuild chat store {name!r}: import its package before loading the memory")
