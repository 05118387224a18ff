"""mini-swe-agent with FlexA-Mem: every model query sees the rendered memory.

Runs offline as is: mini-swe-agent's deterministic model plays a scripted run of real
shell commands (in a temporary directory) whose outputs soon exceed the budget. To use a
real model, change the one line marked below, e.g. to
``LitellmModel(model_name="anthropic/claude-sonnet-4-5-20250929")``, and pass ``--task``.

    python examples/minisweagent_run.py --budget 3000
    flexamem replay /tmp/.../run.traj.json --budget 3000 --summary   # what the model saw

The same from the command line, with any model class::

    mini -c mini.yaml -c examples/minisweagent_flexamem.yaml -m anthropic/claude-sonnet-4-5-20250929
    mini-extra swebench -c swebench.yaml -c examples/minisweagent_flexamem.yaml \
        --model-class flexamem_minisweagent.FlexAMemModel --subset verified --slice 0:5 -o out
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

import yaml
from flexamem_minisweagent import FlexAMemAgent
from minisweagent.config import builtin_config_dir
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import DeterministicToolcallModel

COMMANDS = [
    "seq 1 120 | sed 's/^/inventory line /'",
    "python3 -c \"[print(f'log entry {i}: module_{i} status=ok latency={i * 7}ms') for i in range(80)]\"",
    "printf 'MAGIC_TOKEN=zebra-4521\\nREGION=eu-west\\n' > settings.env && cat settings.env",
    "python3 -c \"[print(f'test_case_{i} PASSED in {i / 10:.1f}s') for i in range(90)]\"",
    "seq 1 100 | awk '{print \"metric\", $1, $1 * $1}'",
    "python3 -c \"[print(f'warning W{i:03d}: unused variable tmp_{i}') for i in range(70)]\"",
    "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat settings.env",
]
TASK = "Find the value of MAGIC_TOKEN that the setup writes into settings.env and report it."


def scripted_outputs() -> list[dict]:
    """The replies the offline model gives: one bash tool call each."""
    outputs = []
    for n, command in enumerate(COMMANDS):
        call = {"id": f"call_{n}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
        outputs.append({"role": "assistant", "content": f"Step {n + 1}.", "tool_calls": [call],
                        "extra": {"actions": [{"command": command, "tool_call_id": f"call_{n}"}], "cost": 0.0}})
    return outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=3000, help="context budget of every model call")
    parser.add_argument("--task", default=TASK)
    parser.add_argument("--workdir", type=Path, default=None, help="where the commands run (default: a temp dir)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="flexamem_mswea_"))

    inner = DeterministicToolcallModel(outputs=scripted_outputs())  # <- a real model: LitellmModel(model_name=...)

    agent_config = yaml.safe_load((builtin_config_dir / "mini.yaml").read_text())["agent"]
    agent_config.update(step_limit=30, cost_limit=3.0, output_path=workdir / "run.traj.json")
    agent = FlexAMemAgent(inner, LocalEnvironment(cwd=str(workdir)), budget=args.budget, **agent_config)
    result = agent.run(args.task, instance_id="example")

    print(f"exit status: {result['exit_status']}; submission: {result['submission'].strip()!r}")
    for message in agent.messages:
        info = (message.get("extra") or {}).get("flexamem")
        if info:
            shown = "full history" if info["passthrough"] else "memory + recent window"
            print(f"  call with {info['messages_in']:2d} messages in history -> sent {info['messages_sent']:2d} "
                  f"({info['tokens']:,} tokens, {shown})")
    print(f"complete trajectory: {workdir / 'run.traj.json'} ({len(agent.messages)} messages)")
    print(f"replay it: flexamem replay {workdir / 'run.traj.json'} --budget {args.budget} --summary")


if __name__ == "__main__":
    main()
