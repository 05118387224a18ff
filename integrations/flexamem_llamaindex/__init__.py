"""FlexA-Mem for LlamaIndex: ``FlexAMemory`` where ``ChatMemoryBuffer`` was, ``FlexAMemLLM`` for tool loops.

```python
from flexamem_llamaindex import FlexAMemory, agent_memory
memory = FlexAMemory.from_defaults(budget=8000)          # chat engines
memory, llm = agent_memory(llm, namespace="run-7")        # FunctionAgent(llm=llm): every call bounded
agent.run("...", memory=memory)
```
"""

from .agent import AgentMemory, agent_memory
from .convert import LlamaIndexCodec, from_core, from_core_list, to_core, to_core_list, tool_calls_of
from .llm import FlexAMemLLM
from .memory import FlexAMemory, LastGet
from .presets import config_for

__all__ = [
    "AgentMemory",
    "FlexAMemLLM",
    "FlexAMemory",
    "LastGet",
    "LlamaIndexCodec",
    "agent_memory",
    "config_for",
    "from_core",
    "from_core_list",
    "to_core",
    "to_core_list",
    "tool_calls_of",
]
