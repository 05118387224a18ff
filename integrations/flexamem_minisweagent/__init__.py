"""FlexA-Mem for mini-swe-agent: every model query sees the rendered memory.

* :class:`FlexAMemModel`: a model class (``model.model_class`` / ``--model-class
  flexamem_minisweagent.FlexAMemModel``) wrapping any mini-swe-agent model; works with
  ``mini``, ``mini-extra swebench`` and any agent class.
* :class:`FlexAMemAgent`: the default agent with the wrapper built in, for Python users.
* ``flexamem replay TRAJ.json --budget 8000``: what a saved run would have shown its model.
"""

from .agent import FlexAMemAgent
from .convert import ConvertedHistory, is_memory_dict, to_core, to_host
from .model import FlexAMemModel
from .settings import FlexAMemSettings

__all__ = [
    "ConvertedHistory",
    "FlexAMemAgent",
    "FlexAMemModel",
    "FlexAMemSettings",
    "is_memory_dict",
    "to_core",
    "to_host",
]
