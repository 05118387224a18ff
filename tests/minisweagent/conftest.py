"""Shared setup of the mini-swe-agent adapter tests: offline, quiet, helpers on the path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm prices without the network

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # mswea_fakes is imported by path by the config route too
    sys.path.insert(0, str(HERE))
