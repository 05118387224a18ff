"""mini-swe-agent's own deterministic models, recording what they receive, and scripts for them.

The recording subclasses are importable by path (``mswea_fakes.RecordingDeterministicModel``)
so the config route and ``mini-extra swebench`` in a subprocess can select them as the
inner model class; with ``record_path`` set they also append each received list to a
JSON Lines file.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

from minisweagent.exceptions import FormatError
from minisweagent.models.test_models import (
    DeterministicModel,
    DeterministicResponseAPIToolcallModel,
    DeterministicToolcallModel,
    make_response_api_output,
)

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SECRET = "zebra-4521"


class _Recording:
    """Keeps a deep copy of every message list the model receives."""

    def _setup_recording(self, record_path: str) -> None:
        self.received: list[list[dict[str, Any]]] = []
        self.record_path = record_path

    def _record(self, messages: list[dict[str, Any]]) -> None:
        snapshot = copy.deepcopy(list(messages))
        self.received.append(snapshot)
        if self.record_path:
            with Path(self.record_path).open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(snapshot, default=str) + "\n")


class RecordingDeterministicModel(_Recording, DeterministicModel):
    """Also raises the FormatError a real model raises for a reply marked ``format_error``."""

    def __init__(self, record_path: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._setup_recording(record_path)

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        self._record(messages)
        upcoming = self.config.outputs[self.current_index + 1]
        if "format_error" in upcoming:
            self.current_index += 1
            raise FormatError({"role": "user", "content": upcoming["format_error"],
                               "extra": {"interrupt_type": "FormatError", "cost": upcoming["cost"]}})
        return super().query(messages, **kwargs)


class RecordingDeterministicToolcallModel(_Recording, DeterministicToolcallModel):
    def __init__(self, record_path: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._setup_recording(record_path)

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        self._record(messages)
        return super().query(messages, **kwargs)


class RecordingDeterministicResponseModel(_Recording, DeterministicResponseAPIToolcallModel):
    def __init__(self, record_path: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._setup_recording(record_path)

    def query(self, messages: list[dict], **kwargs: Any) -> dict:
        self._record(messages)
        return super().query(messages, **kwargs)


#: Shell commands with verbose output; the fourth writes the fact the task asks about.
VERBOSE_COMMANDS = [
    "ls -la && seq 1 80 | sed 's/^/inventory line /'",
    "python3 -c \"[print(f'log entry {i}: checking module_{i} status=ok latency={i * 7}ms') for i in range(60)]\"",
    "for i in $(seq 1 45); do echo \"build step $i compiled unit_$i.o with flags -O2 -Wall\"; done",
    f"printf 'MAGIC_TOKEN={SECRET}\\nREGION=eu-west\\n' > settings.env && cat settings.env && seq 100 150",
    "python3 -c \"[print(f'test_case_{i} PASSED in {i / 10:.1f}s') for i in range(70)]\"",
    "for f in alpha beta gamma delta epsilon; do seq 1 15 | sed \"s/^/$f record /\"; done",
    "python3 -c \"[print(f'dependency package_{i}=={i}.{i % 7}.0 installed') for i in range(55)]\"",
    "seq 1 90 | awk '{print \"metric\", $1, $1 * $1}'",
    "python3 -c \"[print(f'warning W{i:03d}: unused variable tmp_{i} in file_{i % 9}.py') for i in range(50)]\"",
    "cat settings.env && seq 200 260 | sed 's/^/checksum /'",
]

TASK = "Find the value of MAGIC_TOKEN that the setup writes into settings.env and report it."


FORMAT_ERROR_TEXT = "Please always provide EXACTLY ONE action in triple backticks."


def format_error_output(cost: float = 0.01) -> dict[str, Any]:
    """A reply RecordingDeterministicModel turns into the FormatError of an unparseable reply."""
    return {"format_error": FORMAT_ERROR_TEXT, "cost": cost}


def text_outputs(commands: list[str] = VERBOSE_COMMANDS, cost: float = 0.01,
                 format_error_after: int | None = None) -> list[dict[str, Any]]:
    """Scripted replies for DeterministicModel: one bash block each, then the submission.

    ``format_error_after=n`` inserts one unparseable reply after the n-th command.
    """
    outputs = [{"role": "assistant",
                "content": f"THOUGHT: step {n}: looking around.\n\n```mswea_bash_command\n{cmd}\n```",
                "extra": {"actions": [{"command": cmd}], "cost": cost, "timestamp": time.time()}}
               for n, cmd in enumerate(commands, 1)]
    if format_error_after is not None:
        outputs.insert(format_error_after, format_error_output(cost))
    final = f"{SUBMIT} && echo {SECRET}"
    outputs.append({"role": "assistant", "content": f"THOUGHT: done.\n\n```mswea_bash_command\n{final}\n```",
                    "extra": {"actions": [{"command": final}], "cost": cost, "timestamp": time.time()}})
    return outputs


def toolcall_outputs(commands: list[str] = VERBOSE_COMMANDS, cost: float = 0.01,
                     parallel: int = 2) -> list[dict[str, Any]]:
    """Scripted replies for DeterministicToolcallModel: ``parallel`` tool calls per reply."""
    outputs = []
    for n in range(0, len(commands), parallel):
        batch = commands[n:n + parallel]
        calls = [{"id": f"call_{n + j}", "type": "function",
                  "function": {"name": "bash", "arguments": json.dumps({"command": c})}}
                 for j, c in enumerate(batch)]
        actions = [{"command": c, "tool_call_id": f"call_{n + j}"} for j, c in enumerate(batch)]
        outputs.append({"role": "assistant", "content": f"Running {len(batch)} commands.", "tool_calls": calls,
                        "extra": {"actions": actions, "cost": cost, "timestamp": time.time()}})
    final = f"{SUBMIT} && echo {SECRET}"
    outputs.append({"role": "assistant", "content": "Submitting.",
                    "tool_calls": [{"id": "call_final", "type": "function",
                                    "function": {"name": "bash", "arguments": json.dumps({"command": final})}}],
                    "extra": {"actions": [{"command": final, "tool_call_id": "call_final"}], "cost": cost,
                              "timestamp": time.time()}})
    return outputs


def response_outputs(commands: list[str] = VERBOSE_COMMANDS) -> list[dict[str, Any]]:
    """Scripted Responses-API replies for DeterministicResponseAPIToolcallModel."""
    out = [make_response_api_output(f"step {n}", [{"command": c, "tool_call_id": f"fc_{n}"}])
           for n, c in enumerate(commands)]
    out.append(make_response_api_output("submit", [{"command": SUBMIT, "tool_call_id": "fc_final"}]))
    return out


def long_history(steps: int = 8, lines: int = 20) -> list[dict[str, Any]]:
    """A tool-calling history (as the agent keeps it) of ``steps`` commands with verbose outputs."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a shell agent.", "extra": {}},
                                      {"role": "user", "content": TASK, "extra": {}}]
    for n in range(steps):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"cat part_{n}.log"})}}
        messages.append({"role": "assistant", "content": f"Step {n}.", "tool_calls": [call], "extra": {}})
        body = "\n".join(f"part {n} line {i}: status=ok value={i * n}" for i in range(lines))
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "extra": {},
                         "content": f"<returncode>0</returncode>\n<output>\n{body}\n</output>"})
    return messages
