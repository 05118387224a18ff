"""FlexA-Mem: write every unit of history once, render a fresh memory for every call's budget.

The names a user needs: :class:`FlexAMem` and its settings (:class:`FlexAMemConfig`,
:class:`Tuning`), the message type adapters convert to (:class:`Message`, :class:`ToolCall`),
what a render returns (:class:`Rendered`), stores (:func:`open_store` and the in-memory one),
the record writers, the protocols of the parts a user swaps, and the recovery strategy
interface with its registry.
"""

from .config import FlexAMemConfig, Tuning
from .memory import FlexAMem
from .model.messages import Message, MessageError, ToolCall
from .model.protocols import Embedder, RecordWriter, Store, Tokenizer
from .recall.strategies import RecoveryStrategy, register_strategy, registered_strategies
from .request.budget import BudgetError
from .request.rendered import Rendered
from .stores import InMemoryStore, open_store, register_store
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
    "RecoveryStrategy",
    "Rendered",
    "RuleRecordWriter",
    "Store",
    "Tokenizer",
    "ToolCall",
    "Tuning",
    "open_store",
    "register_store",
    "register_strategy",
    "registered_strategies",
]
