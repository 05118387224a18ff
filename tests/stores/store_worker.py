"""A separate process writing to a store, for the concurrency, crash and restart tests.

    python store_worker.py append URL NS TAG N SHARED   # own chain of N units + the shared chain
    python store_worker.py forever URL NS TAG PIECES    # write until killed (crash test)
    python store_worker.py restart URL NS               # write a fixed history, then exit

``append`` prints one JSON line: the keys it wrote (True) in order. ``forever`` prints
"started" once its store is open.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from langgraph_backends import open_url

from flexamem_core.testing.storekit import make_chain, make_merged


def restart_history() -> tuple[list, list]:
    chain = make_chain("restart", 6, texts={3: "pytest printed 3 failed, 12 passed"})
    keys = [t[0].key for t in chain]
    merges = [make_merged(keys[:3], "steps 1-3"), make_merged(keys[3:5], "steps 4-5")]
    return chain, merges


def main(argv: list[str]) -> None:
    command, url, ns = argv[:3]
    store = open_url(url)
    if command == "append":
        tag, n, shared = argv[3], int(argv[4]), int(argv[5])
        own = make_chain(tag, n)
        common = make_chain("shared", shared)
        written = []
        for i in range(max(n, shared)):  # interleave own and shared writes
            for chain in (own, common):
                if i < len(chain) and store.write_unit(ns, *chain[i]):
                    written.append(chain[i][0].key)
        print(json.dumps(written), flush=True)
    elif command == "forever":
        tag, pieces = argv[3], int(argv[4])
        print("started", flush=True)
        parent, step = None, 1
        while True:
            (triple,) = make_chain(tag, 1, parent=parent, first_step=step, n_pieces=pieces, piece_chars=400)
            store.write_unit(ns, *triple)
            parent, step = triple[0].key, step + 1
    elif command == "restart":
        chain, merges = restart_history()
        for t in chain:
            store.write_unit(ns, *t)
        for m in merges:
            store.put_merged(ns, m)
    else:
        raise SystemExit(f"unknown command {command!r}")
    close = getattr(store, "close", None)
    if close:
        close()


if __name__ == "__main__":
    main(sys.argv[1:])
