"""FlexA-Mem for LangGraph and LangChain agents.

- :class:`FlexAMemMiddleware`: ``create_agent(..., middleware=[FlexAMemMiddleware()])``.
- :class:`FlexAMemRenderer`: for hand-built ``StateGraph`` model nodes, as a separate node,
  or as the ``pre_model_hook`` of the deprecated ``create_react_agent``.
- :class:`LangGraphBaseStore`: keep FlexA-Mem's notes in a LangGraph ``BaseStore``.
- :class:`FlexAMemSaver`: wrap any checkpointer so each saved thread is ingested at put time.
"""

from .convert import CODEC, MEMORY_MESSAGE_ID, LangChainCodec, is_memory_message, to_core, to_core_message, to_langchain
from .hooks import FlexAMemRenderer
from .middleware import FlexAMemMiddleware
from .namespaces import namespace_for_thread
from .render import LangChainRender, arender_langchain, render_langchain
from .saver import FlexAMemSaver
from .store import LangGraphBaseStore

__all__ = [
    "CODEC",
    "MEMORY_MESSAGE_ID",
    "FlexAMemMiddleware",
    "FlexAMemRenderer",
    "FlexAMemSaver",
    "LangChainCodec",
    "LangChainRender",
    "LangGraphBaseStore",
    "arender_langchain",
    "is_memory_message",
    "namespace_for_thread",
    "render_langchain",
    "to_core",
    "to_core_message",
    "to_langchain",
]
