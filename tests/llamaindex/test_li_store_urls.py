"""A store passed to ``FlexAMemory`` as an object serialises as its own URL and reopens with
its data in another process (the core's store registry)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from flexamem_llamaindex import FlexAMemory
from llama_index.core.base.llms.types import ChatMessage

from flexamem_core.stores import SQLiteStore


def test_a_sqlite_store_object_serialises_as_its_url_and_reopens_elsewhere(tmp_path):
    store = SQLiteStore(tmp_path / "li.db")
    memory = FlexAMemory.from_defaults(budget=1500, namespace="li-url", store=store)
    chat = []
    for i in range(30):
        chat += [ChatMessage(role="user", content=f"what is in crate {i}?"),
                 ChatMessage(role="assistant", content=f"crate {i} holds widget W-{i:04d} " * 8)]
    memory.set(chat)
    memory.get()
    data = json.loads(json.dumps(memory.to_dict()))
    assert data["store_url"] == store.url and data["store_url"].startswith("sqlite:////")
    units = len(store.notes("li-url"))
    assert units > 0
    script = textwrap.dedent(f"""
        import json, sys
        from flexamem_core.stores import open_store
        store = open_store({data["store_url"]!r})
        print(len(store.notes("li-url")))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(out.stdout.strip()) == units
