"""Reading saved mini-swe-agent trajectories and finding the model calls in them.

A trajectory is the ``.traj.json`` a run saves (v1 ``mini-swe-agent-1`` or v2
``mini-swe-agent-1.1``): ``{"info": ..., "messages": [...], "trajectory_format": ...}``.
Collections of them as a JSON list or JSON Lines (optionally gzipped) are read too.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class TrajectoryError(ValueError):
    """A file that is not a readable trajectory, or a selection that matches none."""


def _is_trajectory(data: Any) -> bool:
    return isinstance(data, Mapping) and isinstance(data.get("messages"), list)


def load_trajectories(path: str | Path) -> list[dict[str, Any]]:
    """Every trajectory in a ``.json``/``.traj.json``, JSON list, or ``.jsonl`` (``.gz`` ok) file."""
    path = Path(path)
    if not path.is_file():
        raise TrajectoryError(f"no such file: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise TrajectoryError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(text)
        items = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise TrajectoryError(f"{path}: line {n} is not JSON ({exc.msg})") from None
    trajectories = [t for t in items if _is_trajectory(t)]
    if not trajectories:
        raise TrajectoryError(f"{path} holds no trajectory (a JSON object with a 'messages' list)")
    return trajectories


def select_trajectory(trajectories: Sequence[dict[str, Any]], instance: str | None = None,
                      index: int | None = None) -> dict[str, Any]:
    """One trajectory, by instance id or index; a file of several needs one of them."""
    if instance is not None:
        for t in trajectories:
            if t.get("instance_id") == instance:
                return t
        raise TrajectoryError(f"no trajectory with instance_id {instance!r}")
    if index is not None:
        if not -len(trajectories) <= index < len(trajectories):
            raise TrajectoryError(f"index {index} out of range: the file holds {len(trajectories)} trajectories")
        return trajectories[index]
    if len(trajectories) > 1:
        raise TrajectoryError(f"the file holds {len(trajectories)} trajectories: pick one with --instance ID "
                              "or --index N")
    return trajectories[0]


def model_class_path(trajectory: Mapping[str, Any]) -> str:
    """The import path of the model class that produced the trajectory (the inner one if wrapped)."""
    config = (trajectory.get("info") or {}).get("config") or {}
    return str(config.get("inner_model_type") or config.get("model_type") or "")


def is_model_output(message: Mapping[str, Any]) -> bool:
    """Whether a saved message is what a model call produced.

    An assistant message (or a Responses-API response object), or the format-error
    message saved in place of an unparseable reply (v2 saves no assistant message then).
    """
    if message.get("role") == "assistant" or message.get("object") == "response":
        return True
    extra = message.get("extra")
    return isinstance(extra, Mapping) and extra.get("interrupt_type") == "FormatError"


def model_calls(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the messages each model call produced; call ``i`` saw ``messages[:index]``."""
    return [k for k, m in enumerate(messages) if isinstance(m, Mapping) and is_model_output(m)]
