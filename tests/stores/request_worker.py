"""A process serving model calls of one thread, for the cross-process request tests.

    python request_worker.py URL NAMESPACE BUDGET

Reads call numbers from stdin, one per line; for each renders the history before that model
call of :func:`agent_run` (``FlexAMem.render`` with the default cache-stable request, the
hashing embedder) and prints one JSON line: the request as sent (chat-completions dicts)
and the cache step. An empty line ends it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from langgraph_backends import open_url

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.index.embeddings import HashingEmbedder
from flexamem_core.request.wire import chat_message


def agent_run(steps: int = 40) -> list[dict]:
    """A text-action agent run with ~250-token observations (mini-swe-agent's shape)."""
    msgs = [{"role": "system", "content": "You are a shell agent.", "id": "sys"},
            {"role": "user", "content": "Find why the build fails.", "id": "task"}]
    for i in range(steps):
        msgs.append({"role": "assistant", "content": f"THOUGHT: look at part {i}\n```bash\ncat src/mod_{i}.py\n```",
                     "id": f"a{i}"})
        body = "\n".join(f"src/mod_{i}.py:{j}: value_{i}_{j} = compute({j}, {i * j})" for j in range(18))
        msgs.append({"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{body}\n</output>",
                     "id": f"o{i}"})
    return msgs


def model_calls(history: list[dict]) -> list[list[dict]]:
    """The history before every model call of the run (each assistant message), plus the end."""
    cuts = [i for i, m in enumerate(history) if m["role"] == "assistant"] + [len(history)]
    return [history[:i] for i in cuts if i > 0]


def serve(mem: FlexAMem, namespace: str, call: list[dict]) -> dict:
    rendered = mem.render(call, namespace=namespace)
    return {"request": [chat_message(m) for m in rendered.messages], "step": rendered.report["cache"]["step"]}


def main(url: str, namespace: str, budget: int) -> None:
    mem = FlexAMem(FlexAMemConfig(budget=budget), store=open_url(url), embedder=HashingEmbedder())
    calls = model_calls(agent_run())
    for line in sys.stdin:
        if not line.strip():
            break
        print(json.dumps(serve(mem, namespace, calls[int(line)])), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
