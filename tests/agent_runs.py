"""A text-action agent run (mini-swe-agent's shape) and the history before each of its model
calls, shared by the cache-stable request tests and the cross-process worker."""

from __future__ import annotations


def text_action_run(steps: int = 40) -> list[dict]:
    """A run of ``steps`` steps with ~250-token observations."""
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
