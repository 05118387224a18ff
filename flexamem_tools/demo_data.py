"""Histories written for the demo: a long coding-agent run and a long multi-session chat.

Both are generated deterministically from small tables so the demo needs no data set,
no model and no network. Each ends with a question whose answer is one exact string stated
once, far back in the history (:data:`AGENT_QUESTION`, :data:`CHAT_QUESTION`), which is
exactly where trimming and summaries lose it:

- the agent hunts a bug in a fictional ``inventory-service``; at its second step the failing
  test logs the SKU of the row that crashed, and after 60 steps the user asks for that SKU;
- the chat mentions trips in many cities, each with a confirmation code (the distractors),
  and only its first session books Lisbon; it is asked for the Lisbon booking's code.
"""

from __future__ import annotations

import json
import random

from flexamem_core.model.messages import Message, ToolCall

AGENT_SYSTEM = ("You are a careful software engineer working in a shell. Use the tools to inspect and "
                "edit the repository, run the tests, and finish when they pass.")
AGENT_TASK = ("The nightly stock reconciliation job in inventory-service crashes with KeyError for some "
              "warehouses. Find the cause, fix it, and make tests/test_reconcile.py pass.")
#: The user's last message to the agent, and the one string that answers it (logged at step 2).
AGENT_QUESTION = ("Tests pass, thanks. For the incident report: which SKU code crashed the WH-0427 "
                  "reconciliation at the start?")
AGENT_ANSWER = "TR-6620-B"
#: The chat's question, and the one string that answers it (said once, in the first session).
CHAT_QUESTION = "What is the confirmation code of the Lisbon booking?"
CHAT_ANSWER = "XK-4471"

_MODULES = ["reconcile", "warehouse", "pricing", "ledger", "forecast", "audit", "importer", "alerts"]
_FUNCS = ["load", "normalize", "apply", "merge", "validate", "export", "diff", "summarize"]


def _listing(rng: random.Random) -> str:
    files = [f"inventory/{m}.py" for m in _MODULES] + [f"tests/test_{m}.py" for m in _MODULES]
    files += ["config/warehouses.yaml", "config/settings.toml", "README.md", "pyproject.toml"]
    return "\n".join(f"-rw-r--r-- 1 dev dev {rng.randint(800, 9000):>5} Mar 14 09:{i:02d} {f}"
                     for i, f in enumerate(files))


def _source(module: str, rng: random.Random) -> str:
    lines = [f'"""{module.title()} helpers for inventory-service."""', "", "from __future__ import annotations",
             "import logging", "", "log = logging.getLogger(__name__)", ""]
    for f in _FUNCS:
        lines += [f"def {f}_{module}(rows, *, warehouse_id: str):",
                  f"    \"\"\"{f.title()} {module} rows for one warehouse.\"\"\"",
                  f"    limit = {rng.randint(10, 500)}",
                  "    out = []",
                  "    for row in rows[:limit]:",
                  f"        out.append(row[\"sku\"].upper() + \"-{module[:3]}\")",
                  "    return out", ""]
    if module == "reconcile":
        lines[20:20] = ["def stock_key(row):", "    # legacy warehouses use 'sku_code' instead of 'sku'",
                        "    return row['sku']", ""]
    return "\n".join(f"{i + 1:>4}  {ln}" for i, ln in enumerate(lines))


def _pytest_failure() -> str:
    return "\n".join([
        "============================= test session starts ==============================",
        "collected 14 items", "",
        "tests/test_reconcile.py ......F.F.....                                   [100%]", "",
        "=================================== FAILURES ===================================",
        "______________________ test_reconcile_legacy_warehouse_WH_0427 ______________________",
        "    def test_reconcile_legacy_warehouse_WH_0427():",
        ">       result = reconcile(load_rows('fixtures/wh_0427.csv'), warehouse_id='WH-0427')",
        "inventory/reconcile.py:22: in stock_key",
        "    return row['sku']",
        "E   KeyError: 'sku'",
        "----------------------------- Captured log call ------------------------------",
        "WARNING  inventory.reconcile:reconcile.py:41 fixtures/wh_0427.csv row 1187: no 'sku', "
        f"sku_code={AGENT_ANSWER}",
        "______________________ test_reconcile_legacy_warehouse_WH_0913 ______________________",
        "E   KeyError: 'sku'",
        "=========================== short test summary info ============================",
        "FAILED tests/test_reconcile.py::test_reconcile_legacy_warehouse_WH_0427 - KeyError: 'sku'",
        "FAILED tests/test_reconcile.py::test_reconcile_legacy_warehouse_WH_0913 - KeyError: 'sku'",
        "========================= 2 failed, 12 passed in 0.84s =========================",
    ])


def _yaml(rng: random.Random) -> str:
    rows = []
    for i in range(24):
        wid = f"WH-{rng.randint(100, 999):04d}" if i not in (5, 17) else ("WH-0427" if i == 5 else "WH-0913")
        legacy = i in (5, 17)
        rows.append(f"- id: {wid}\n  region: {rng.choice(['eu-west', 'us-east', 'ap-south'])}\n"
                    f"  schema: {'legacy_v1' if legacy else 'v3'}\n  sku_field: {'sku_code' if legacy else 'sku'}")
    return "\n".join(rows)


def agent_history(steps: int = 60) -> list[Message]:
    """A long tool-calling run (explore, read, grep, run tests, edit, re-run), then the user's
    :data:`AGENT_QUESTION`, answered only by a line the failing test logged at step 2."""
    rng = random.Random(7)
    msgs = [Message(role="system", content=AGENT_SYSTEM, id="sys"),
            Message(role="user", content=AGENT_TASK, id="task")]
    script: list[tuple[str, dict[str, object], str]] = [
        ("run_shell", {"command": "ls -l inventory tests config"}, _listing(rng)),
        ("run_shell", {"command": "python -m pytest tests/test_reconcile.py -q"}, _pytest_failure()),
        ("read_file", {"path": "config/warehouses.yaml"}, _yaml(rng)),
    ]
    for module in _MODULES:
        script.append(("read_file", {"path": f"inventory/{module}.py"}, _source(module, rng)))
        script.append(("run_shell", {"command": f"grep -n 'warehouse_id' inventory/{module}.py"},
                       "\n".join(f"{rng.randint(5, 80)}:    def {f}_{module}(rows, *, warehouse_id: str):"
                                 for f in _FUNCS)))
    while len(script) < steps - 3:
        module = rng.choice(_MODULES)
        script.append(("run_shell", {"command": f"python -m pytest tests/test_{module}.py -q"},
                       f"collected {rng.randint(5, 30)} items\n\n" + "." * rng.randint(5, 30) +
                       f"\n\n{rng.randint(5, 30)} passed in {rng.random():.2f}s"))
    script += [
        ("edit_file", {"path": "inventory/reconcile.py", "old": "return row['sku']",
                       "new": "return row.get('sku') or row['sku_code']"}, "Edited inventory/reconcile.py (1 change)"),
        ("run_shell", {"command": "python -m pytest tests/test_reconcile.py -q"},
         "collected 14 items\n\ntests/test_reconcile.py ..............  [100%]\n\n14 passed in 0.79s"),
        ("run_shell", {"command": "git diff --stat"}, " inventory/reconcile.py | 2 +-\n 1 file changed"),
    ]
    for i, (name, args, output) in enumerate(script[:steps]):
        call = ToolCall(name=name, arguments=json.dumps(args), id=f"call_{i}")
        what = args.get("path") or args.get("command")
        msgs.append(Message(role="assistant", content=f"Step {i + 1}: checking {what}",
                            tool_calls=(call,), id=f"ai_{i}"))
        msgs.append(Message(role="tool", content=output, tool_call_id=call.id, name=name, id=f"tool_{i}"))
    msgs.append(Message(role="user", content=AGENT_QUESTION, id="question"))
    return msgs


_PEOPLE = ["Maya", "Jonas", "Priya", "Tomasz", "Aiko", "Lucas"]
_TOPICS = [
    ("the garden", "planted {n} tomato seedlings of the {v} variety along the south fence"),
    ("the move", "signed the lease for the flat on {street} Street, moving in on {date}"),
    ("the dog", "took Biscuit to Dr. {person}'s clinic; the vaccine booster is due on {date}"),
    ("work", "the quarterly report for client {client} is due on {date}, about {n} pages"),
    ("the trip", "booked {n} nights in {city} at Hotel {v}, confirmation code {code}"),
    ("the budget", "spent {n} euros on groceries this month, {m} more than planned"),
    ("cooking", "tried the {v} curry recipe from {person}; needs {n} grams of lentils"),
    ("running", "ran {n} km in {m} minutes along the river, a new personal best"),
]
#: Where the trips go: Lisbon once (the first trip, :data:`CHAT_ANSWER`), these after it.
_CITIES = ["Porto", "Seville", "Bologna", "Ghent", "Krakow", "Bergen", "Lyon", "Tallinn"]
_FILLER = [
    "That sounds good, tell me more about how it went.",
    "I remember you mentioned something similar a while ago.",
    "Let me know if you want me to keep track of that for you.",
    "Here are a few general tips that might help with planning ahead.",
    "It is worth writing these details down so nothing slips through.",
]


def _code(rng: random.Random) -> str:
    """A booking's confirmation code, never the Lisbon one."""
    code = CHAT_ANSWER
    while code == CHAT_ANSWER:
        code = f"{rng.choice('BDFGHJMNPRTVW')}{rng.choice('KLQSZ')}-{rng.randint(1000, 9999)}"
    return code


def conversation_history(sessions: int = 16, turns_per_session: int = 14) -> list[Message]:
    """A long chat across dated sessions, with names, dates and numbers to remember. Its first
    trip is to Lisbon (code :data:`CHAT_ANSWER`); every later one goes elsewhere."""
    rng = random.Random(11)
    msgs: list[Message] = []
    trips = 0
    for s in range(sessions):
        date = f"2025-{1 + s * 11 // sessions:02d}-{3 + (s * 7) % 25:02d}"
        for t in range(turns_per_session):
            mid = f"s{s}_t{t}"
            meta = {"session": str(s), "date": date}
            if t % 2 == 0:
                topic, tmpl = _TOPICS[(s * 3 + t // 2) % len(_TOPICS)]
                city, code = "", ""
                if topic == "the trip":
                    city, code = ("Lisbon", CHAT_ANSWER) if not trips else (rng.choice(_CITIES), _code(rng))
                    trips += 1
                fact = tmpl.format(n=rng.randint(2, 60), m=rng.randint(2, 60), v=rng.choice(
                    ["San Marzano", "Amarela", "Brava", "Saffron", "Verde"]), street=rng.choice(
                    ["Linden", "Harbor", "Maple", "Quarry"]),
                    date=f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                    person=rng.choice(_PEOPLE), client=rng.choice(["Northwind", "Contoso", "Fabrikam"]),
                    city=city, code=code)
                content = f"Quick update on {topic}: I {fact}. " + rng.choice(_FILLER)
                msgs.append(Message(role="user", content=content, id=mid, metadata=meta))
            else:
                content = " ".join(rng.sample(_FILLER, 3)) + " " + " ".join(rng.sample(_FILLER, 2))
                msgs.append(Message(role="assistant", content=content, id=mid, metadata=meta))
    return msgs


def conversation_questions() -> list[str]:
    """Questions whose answers sit in single turns of :func:`conversation_history`
    (:data:`CHAT_QUESTION` first)."""
    return [
        CHAT_QUESTION,
        "When is the dog's vaccine booster due?",
        "How many tomato seedlings were planted, and which variety?",
    ]
