"""FlexA-Mem: write every unit of history once, render a fresh memory for every call's budget."""

from .config import FlexAMemConfig
from .memory import FlexAMem
from .model.messages import Message, MessageError, ToolCall
from .model.protocols import Embedder, RecordWriter, Store, Tokenizer
from .request.budget import BudgetError
from .request.rendered import Rendered
from .stores import InMemoryStore
from .write.writers import LLMRecordWriter, RuleRecordWriter

__all__ = [
    "BudgetError",
    "Embedder",
    "FlexAMem",
    "FlexAMemConfig",
    "InMemoryStore",
    "LLMRecordWriter",
    "Message",
    "MessageError",
    "RecordWriter",
    "Rendered",
    "RuleRecordWriter",
    "Store",
    "Tokenizer",
    "ToolCall",
]
