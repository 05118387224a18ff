"""FlexA-Mem as a checkpointer wrapper: ingest a thread's messages when its state is saved.

:class:`FlexAMemSaver` wraps any LangGraph checkpoint saver (``InMemorySaver``,
``SqliteSaver``, ``PostgresSaver`` and their async forms) and is one itself. Every method
goes to the wrapped saver unchanged; ``put`` and ``aput`` additionally, after the wrapped
saver has stored the checkpoint, write the complete units of the thread's messages into
FlexA-Mem, in the namespace the middleware renders that thread from. So the units are
written when the state is saved, and the next render finds them already stored instead of
writing them itself.

The checkpoint always comes first: an ingestion that fails (a store gone away, a message
the codec cannot read) is logged as one WARNING per checkpoint and never raised; the next
render (or put) writes what is missing, since ingestion is idempotent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    V,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from flexamem_core import FlexAMem

from .convert import to_core
from .defaults import logger
from .namespaces import namespace_for_thread, thread_id_from_config


class FlexAMemSaver(BaseCheckpointSaver[V]):
    """A checkpoint saver that also ingests each saved thread's messages into FlexA-Mem.

    Usage: ``create_agent(model, tools, middleware=[FlexAMemMiddleware(mem)],
    checkpointer=FlexAMemSaver(InMemorySaver(), memory=mem))``, the same ``mem`` in both.

    ``saver`` is the saver that stores the checkpoints; every method and attribute is its.
    ``messages_key`` is the state key holding the messages (``"messages"`` for
    ``create_agent`` and ``MessagesState``). A checkpoint is ingested when that channel
    changed in it (``new_versions``), into the thread's namespace
    (:func:`~flexamem_langgraph.namespace_for_thread`). ``subgraphs=False`` ingests only the
    root graph's checkpoints (``checkpoint_ns`` empty): a subgraph's checkpoints share the
    thread id, and its messages are another history.
    """

    def __init__(self, saver: BaseCheckpointSaver[V], *, memory: FlexAMem, messages_key: str = "messages",
                 subgraphs: bool = False) -> None:
        # No BaseCheckpointSaver.__init__: it only sets ``serde``, which here is the wrapped saver's.
        if not isinstance(saver, BaseCheckpointSaver):
            raise TypeError(f"saver must be a LangGraph BaseCheckpointSaver, not {type(saver).__name__}")
        if not isinstance(memory, FlexAMem):
            raise TypeError(f"memory must be the FlexAMem the middleware renders from, not {type(memory).__name__}")
        if not isinstance(messages_key, str) or not messages_key:
            raise ValueError("messages_key must be a non-empty state key")
        self.saver = saver
        self.memory = memory
        self.messages_key = messages_key
        self.subgraphs = subgraphs

    # -- ingestion ---------------------------------------------------------------------

    def _due(self, config: RunnableConfig, checkpoint: Checkpoint,
             new_versions: ChannelVersions) -> tuple[str, Sequence[Any]] | None:
        """The namespace and messages to ingest for this checkpoint, or ``None`` for nothing new."""
        if self.messages_key not in new_versions:
            return None
        configurable = config.get("configurable") or {}
        if not self.subgraphs and configurable.get("checkpoint_ns"):
            return None
        thread_id = thread_id_from_config(config)
        messages = checkpoint["channel_values"].get(self.messages_key)
        # A DeltaChannel saves a marker between its snapshots, not the list: the render catches up.
        if thread_id is None or not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
            return None
        return (namespace_for_thread(thread_id), messages) if messages else None

    def _failed(self, config: RunnableConfig, checkpoint: Checkpoint, exc: Exception) -> None:
        logger.warning("FlexA-Mem could not ingest thread %r at checkpoint %s (%s: %s); the checkpoint is "
                       "saved and the next render writes the missing units",
                       thread_id_from_config(config), checkpoint.get("id"), type(exc).__name__, exc)

    def _ingest(self, config: RunnableConfig, checkpoint: Checkpoint, new_versions: ChannelVersions) -> None:
        try:
            due = self._due(config, checkpoint, new_versions)
            if due is not None:
                self.memory.ingest(to_core(due[1]).messages, namespace=due[0])
        except Exception as exc:  # the checkpoint is saved: never lose it to memory
            self._failed(config, checkpoint, exc)

    async def _aingest(self, config: RunnableConfig, checkpoint: Checkpoint, new_versions: ChannelVersions) -> None:
        try:
            due = self._due(config, checkpoint, new_versions)
            if due is not None:
                await self.memory.aingest(to_core(due[1]).messages, namespace=due[0])
        except Exception as exc:
            self._failed(config, checkpoint, exc)

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        saved = self.saver.put(config, checkpoint, metadata, new_versions)
        self._ingest(config, checkpoint, new_versions)
        return saved

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        saved = await self.saver.aput(config, checkpoint, metadata, new_versions)
        await self._aingest(config, checkpoint, new_versions)
        return saved

    # -- everything else: the wrapped saver's ------------------------------------------

    @property
    def serde(self) -> SerializerProtocol:  # type: ignore[override]
        return self.saver.serde

    @serde.setter
    def serde(self, value: SerializerProtocol) -> None:
        self.saver.serde = value

    @property
    def config_specs(self) -> list:
        return self.saver.config_specs

    def __getattr__(self, name: str) -> Any:
        # Only for what this class does not define (``setup``, ``conn``, ...).
        if name in {"saver", "memory", "messages_key", "subgraphs"}:
            raise AttributeError(name)
        return getattr(self.saver, name)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> BaseCheckpointSaver[V]:
        inner = self.saver.with_allowlist(extra_allowlist)
        if inner is self.saver:
            return self
        return FlexAMemSaver(inner, memory=self.memory, messages_key=self.messages_key, subgraphs=self.subgraphs)

    def get_next_version(self, current: V | None, channel: None) -> V:
        return self.saver.get_next_version(current, channel)

    def get(self, config: RunnableConfig) -> Checkpoint | None:
        return self.saver.get(config)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.saver.get_tuple(config)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        return self.saver.list(config, filter=filter, before=before, limit=limit)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        return self.saver.put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        return self.saver.delete_thread(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        return self.saver.delete_for_runs(run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        return self.saver.copy_thread(source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        return self.saver.prune(thread_ids, strategy=strategy)

    def get_delta_channel_history(self, *, config: RunnableConfig,
                                  channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        return self.saver.get_delta_channel_history(config=config, channels=channels)

    async def aget(self, config: RunnableConfig) -> Checkpoint | None:
        return await self.saver.aget(config)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self.saver.aget_tuple(config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        async for item in self.saver.alist(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        return await self.saver.aput_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        return await self.saver.adelete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        return await self.saver.adelete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        return await self.saver.acopy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        return await self.saver.aprune(thread_ids, strategy=strategy)

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        return await self.saver.aget_delta_channel_history(config=config, channels=channels)
