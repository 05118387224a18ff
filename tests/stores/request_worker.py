"""A process serving model calls of one thread, for the cross-process request tests.

    python request_worker.py URL NAMESPACE BUDGET

Reads call numbers from stdin, one per line; for each renders the history before that model
call of :func:`tests.agent_runs.text_action_run` (``FlexAMem.render`` with the default cache-stable request, the
hashing embedder) and prints one JSON line: the request as sent (chat-completions dicts)
and the cache step. An empty line ends it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository: tests.agent_runs

from langgraph_backends import open_url

from flexamem_core import FlexAMem, FlexAMemConfig
from flexamem_core.index.embeddings import HashingEmbedder
from flexamem_core.request.wire import chat_message
from tests.agent_runs import model_calls, text_action_run


def serve(mem: FlexAMem, namespace: str, call: list[dict]) -> dict:
    rendered = mem.render(call, namespace=namespace)
    return {"request": [chat_message(m) for m in rendered.messages], "step": rendered.report["cache"]["step"]}


def main(url: str, namespace: str, budget: int) -> None:
    mem = FlexAMem(FlexAMemConfig(budget=budget), store=open_url(url), embedder=HashingEmbedder())
    calls = model_calls(text_action_run())
    for line in sys.stdin:
        if not line.strip():
            break
        print(json.dumps(serve(mem, namespace, calls[int(line)])), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
