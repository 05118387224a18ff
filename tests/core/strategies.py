"""Hypothesis strategies for agent histories and conversations (OpenAI-style dicts)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

WORDS = [
    "the", "parser", "fails", "on", "date", "2024-13-01", "src/app/models.py", "test_utils.py",
    "ValueError", "Traceback", "def", "parse_date", "return", "None", "import", "os", "config.yaml",
    "Alice", "Bob", "Paris", "March", "42", "3.14", "user_id", "getUserName", "OK", "error:",
    "<returncode>0</returncode>", "```", "|", "{", "}", "über", "日本", "emoji🙂", "<|endoftext|>",
]

word = st.sampled_from(WORDS)


@st.composite
def text(draw, min_words: int = 0, max_words: int = 60) -> str:
    ws = draw(st.lists(word, min_size=min_words, max_size=max_words))
    out = []
    for w in ws:
        out.append(w)
        out.append(draw(st.sampled_from([" ", " ", " ", "\n"])))
    return "".join(out).strip()


@st.composite
def tool_step(draw, idx: int) -> list[dict]:
    n_calls = draw(st.integers(1, 3))
    calls = [{"id": f"call_{idx}_{k}", "name": draw(st.sampled_from(["read_file", "run", "search"])),
              "arguments": json.dumps({"path": draw(word), "n": k})} for k in range(n_calls)]
    msgs = [{"role": "assistant", "content": draw(text(0, 20)), "tool_calls": calls, "id": f"a{idx}"}]
    for k, c in enumerate(calls):
        msgs.append({"role": "tool", "content": draw(text(0, 300)), "tool_call_id": c["id"],
                     "name": c["name"], "id": f"t{idx}_{k}"})
    return msgs


@st.composite
def text_action_step(draw, idx: int) -> list[dict]:
    cmd = f"grep -n {draw(word)} {draw(word)}"
    return [
        {"role": "assistant", "content": f"THOUGHT: {draw(text(0, 20))}\n```bash\n{cmd}\n```", "id": f"a{idx}"},
        {"role": "user", "content": f"<returncode>{draw(st.integers(0, 2))}</returncode>\n<output>\n"
                                    f"{draw(text(0, 300))}\n</output>", "id": f"o{idx}"},
    ]


@st.composite
def agent_history(draw, min_steps: int = 1, max_steps: int = 30) -> list[dict]:
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(text(1, 30)), "id": "sys"})
    msgs.append({"role": "user", "content": "TASK: " + draw(text(1, 40)), "id": "task"})
    style = draw(st.sampled_from(["tools", "text", "mixed"]))
    for i in range(draw(st.integers(min_steps, max_steps))):
        kind = style if style != "mixed" else draw(st.sampled_from(["tools", "text"]))
        msgs.extend(draw(tool_step(i)) if kind == "tools" else draw(text_action_step(i)))
        if draw(st.integers(0, 9)) == 0:
            msgs.append({"role": "user", "content": "Also: " + draw(text(1, 20)), "id": f"h{i}"})
    return msgs


@st.composite
def conversation(draw, min_turns: int = 2, max_turns: int = 60) -> list[dict]:
    msgs = []
    n_sessions = draw(st.integers(1, 4))
    n = draw(st.integers(min_turns, max_turns))
    for i in range(n):
        session = i * n_sessions // max(1, n)
        msgs.append({"role": "user" if i % 2 == 0 else "assistant", "content": draw(text(1, 120)),
                     "id": f"m{i}", "metadata": {"session": str(session), "date": f"2024-0{session + 1}-01"}})
    return msgs
