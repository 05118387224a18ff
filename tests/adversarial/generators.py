"""Seeded generators of hostile histories: everything a host or a model may send.

Each generator takes a ``random.Random`` and returns OpenAI-style message dicts, so a
failing case is reproduced from its seed alone.
"""

from __future__ import annotations

import json
import random

WORDS = ["the", "parser", "fails", "src/app/models.py", "ValueError", "def", "return", "None", "import",
         "config.yaml", "42", "3.14", "user_id", "über", "日本", "emoji🙂", "<|endoftext|>", "<|endofprompt|>",
         "```", "{", "}", "|", "\t", "Traceback", "getUserName"]
HOSTILE = ["\x00", "\x1b[31m", "\x07", "\x7f", "\ud800", "\udfff", "\ud83d", "\x0b", "\x0c", "<|endoftext|>",
           "\u3000", "\xa0", "\r\n"]


def text(rng: random.Random, words: int, hostile: float = 0.05) -> str:
    out = []
    for _ in range(words):
        out.append(rng.choice(HOSTILE) if rng.random() < hostile else rng.choice(WORDS))
        out.append(rng.choice([" ", " ", " ", "\n"]))
    return "".join(out)


def output(rng: random.Random) -> str | list[dict]:
    """A tool output or observation: usually short, sometimes empty, huge or odd."""
    kind = rng.random()
    if kind < 0.08:
        return ""
    if kind < 0.14:  # huge
        line = text(rng, 8, 0.02)
        return "\n".join(f"row {i}: {line}" for i in range(rng.randint(300, 2500)))
    if kind < 0.18:  # whitespace runs past 512 characters
        return "start" + rng.choice([" ", "\n", " \n", "\t", "\u3000 "]) * rng.randint(300, 4000) + "end"
    if kind < 0.21:  # image parts
        return [{"type": "text", "text": text(rng, 10)},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "QUJD" * rng.randint(10, 500)}}]
    if kind < 0.25:  # a long run of control characters
        return rng.choice(["\x00", "\x1b", "\x07"]) * rng.randint(100, 3000) + " tail"
    return text(rng, rng.randint(0, 300), hostile=rng.choice([0, 0.02, 0.2]))


def tool_step(rng: random.Random, idx: int, used_ids: list[str]) -> list[dict]:
    """An assistant message with 1-4 parallel calls and their results, broken in various ways."""
    n = rng.choice([1, 1, 1, 2, 3, 4])
    calls = []
    for k in range(n):
        r = rng.random()
        if r < 0.1:
            call_id = None  # missing id
        elif r < 0.16 and used_ids:
            call_id = rng.choice(used_ids)  # an id used before
        elif r < 0.2 and calls and calls[-1]["id"]:
            call_id = calls[-1]["id"]  # repeated in the same message
        else:
            call_id = f"call_{idx}_{k}"
        used_ids.append(call_id) if call_id else None
        calls.append({"id": call_id, "name": rng.choice(["read_file", "run", "search\x00"]),
                      "arguments": json.dumps({"path": text(rng, 2, 0.1), "n": k})})
    msgs: list[dict] = [{"role": "assistant", "content": text(rng, rng.randint(0, 30)),
                         "tool_calls": [{k: v for k, v in c.items() if v is not None} for c in calls]}]
    results = []
    for c in calls:
        r = rng.random()
        if r < 0.08:
            continue  # missing result
        res = {"role": "tool", "content": output(rng)}
        if c["id"] is not None and rng.random() > 0.1:
            res["tool_call_id"] = c["id"]  # else an id-less result
        results.append(res)
        if rng.random() < 0.05:
            results.append(dict(res))  # duplicated result
    if rng.random() < 0.25:
        rng.shuffle(results)  # results out of order
    if rng.random() < 0.05:
        results.append({"role": "tool", "content": "stray", "tool_call_id": f"ghost_{idx}"})  # orphan
    if results and rng.random() < 0.1:  # a message between the call and its results
        results.insert(rng.randint(0, len(results)), {"role": rng.choice(["user", "system"]),
                                                      "content": text(rng, 8)})
    return msgs + results


def text_step(rng: random.Random, idx: int) -> list[dict]:
    """A text-action step (mini-swe-agent style): a bash block, then the observation as a user message."""
    obs = output(rng)
    obs = obs if isinstance(obs, list) else f"<returncode>{rng.randint(0, 2)}</returncode>\n<output>\n{obs}\n</output>"
    return [{"role": "assistant", "content": f"THOUGHT: {text(rng, 12)}\n```bash\ncat file_{idx}.py\n```"},
            {"role": "user", "content": obs}]


def agent_history(rng: random.Random, max_steps: int = 24) -> list[dict]:
    msgs: list[dict] = []
    if rng.random() < 0.8:
        msgs.append({"role": "system", "content": text(rng, rng.randint(1, 200), 0.02)})
        if rng.random() < 0.1:
            msgs.append({"role": "system", "content": "second system prompt"})
    msgs.append({"role": "user", "content": "TASK: " + text(rng, rng.randint(1, 120), 0.05)})
    style = rng.choice(["tools", "text", "mixed"])
    used: list[str] = []
    for i in range(rng.randint(1, max_steps)):
        kind = style if style != "mixed" else rng.choice(["tools", "text"])
        msgs.extend(tool_step(rng, i, used) if kind == "tools" else text_step(rng, i))
        r = rng.random()
        if r < 0.05:
            msgs.append({"role": "user", "content": "Also: " + text(rng, rng.randint(5, 3000), 0.02)})
        elif r < 0.08:
            msgs.append({"role": "system", "content": "inner system note " + text(rng, 5)})
        elif r < 0.1:
            msgs.append({"role": "tool", "content": "orphan result", "tool_call_id": "nobody"})
    return msgs


def conversation(rng: random.Random, max_turns: int = 60) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You remember. " + text(rng, 5)}] if rng.random() < 0.7 else []
    n = rng.randint(2, max_turns)
    sessions = rng.randint(1, 4)
    for i in range(n):
        s = i * sessions // n
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": text(rng, rng.randint(1, 150), 0.03),
                     "metadata": {"session": str(s), "date": f"2024-0{s + 1}-01"}})
    tail = [{"role": "user", "content": "Question: " + text(rng, 10, 0.1)}]
    if rng.random() < 0.3:
        tail.append({"role": "system", "content": "Answer briefly."})
    if rng.random() < 0.3:
        tail.append({"role": "assistant", "content": "", "tool_calls": [{"id": "s1", "name": "search",
                                                                          "arguments": "{}"}]})
    return msgs + tail


def edited(rng: random.Random, history: list[dict]) -> list[dict]:
    """A diverging edit: one earlier message says something else, the rest follows."""
    out = [dict(m) for m in history]
    if len(out) > 3:
        i = rng.randint(1, len(out) - 2)
        if isinstance(out[i].get("content"), str):
            out[i]["content"] = "EDITED " + text(rng, 10)
    return out
