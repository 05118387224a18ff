"""LLM-free evaluation of FlexA-Mem and the baselines a user would pick instead.

``flexamem eval DATASET --data PATH --budgets ... --methods ... --out DIR`` or, from Python,
``flexamem_eval.evaluate("longmemeval", path, budgets=[8000], methods=["piece-retrieval"])``.
"""

from .datasets import DatasetError, load
from .evaluate import EvalError, evaluate, evaluate_to_dir
from .methods import METHODS

__all__ = ["METHODS", "DatasetError", "EvalError", "evaluate", "evaluate_to_dir", "load"]
