"""Scale benchmark of the persistent stores (a script, not a test).

    python tests/benchmarks/bench_stores.py                       # full: 10,000 units, 1,000 x 100
    python tests/benchmarks/bench_stores.py --units 500 --namespaces 40 --per-namespace 20

Store level: units are synthesised (~``--tokens`` tokens of tool output each, cut into
pieces of ~150 tokens) and carry precomputed random unit-norm 384-d embeddings, so write
throughput excludes embedding; ``--embed-sample`` measures the real embedder separately.
Open time and resident memory are measured in a fresh process that opens the store and
loads what a render loads on open: every note (no raw text) and every piece (for BM25).
PostgreSQL needs FLEXAMEM_TEST_POSTGRES_URL (``source .ci/services.sh``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

from flexamem_core.model.messages import Message
from flexamem_core.model.schema import Note, Piece, Unit
from flexamem_core.stores import open_store

DIM = 384
WORDS = ("error", "value", "result", "file", "path", "test", "module", "function", "return", "line",
         "status", "output", "config", "request", "handler", "cache", "index", "build", "import", "class",
         "method", "assert", "failed", "passed")


def synth_unit(ns_tag: str, i: int, parent: str | None, tokens: int, rng: np.random.Generator):
    """One unit of ~``tokens`` tokens (about 0.75 words per token) with its note and pieces."""
    words = rng.choice(WORDS, size=int(tokens * 0.75))
    lines = [" ".join(words[j:j + 12]) for j in range(0, len(words), 12)]
    raw = "\n".join(lines)
    key = uuid.uuid5(uuid.NAMESPACE_URL, f"{ns_tag}/{i}").hex
    msgs = (Message(role="assistant", content=f"run step {i}", id=f"a{i}"),
            Message(role="user", content=raw, id=f"o{i}"))
    unit = Unit(key=key, kind="agent", messages=msgs, raw=raw, tokens=tokens, parent=parent, first_step=i)
    vec = rng.standard_normal(DIM).astype(np.float32)
    note = Note(unit_key=key, record=f"step {i}: " + " ".join(words[:40]), record_tokens=60,
                keywords=tuple(words[:5]), tags=("agent",), description=f"step {i}",
                embedding=vec / np.linalg.norm(vec), links=(parent,) if parent else (), raw_tokens=tokens,
                first_step=i, last_step=i)
    per_piece = 150 * 3 // 4 // 12 or 1  # lines per ~150-token piece
    pieces = [Piece(unit_key=key, index=k, text="\n".join(lines[j:j + per_piece]), tokens=150, block=1,
                    starts_block=k == 0, label=f"step {i}")
              for k, j in enumerate(range(0, len(lines), per_piece))]
    return unit, note, pieces


def write_namespace(url: str, ns: str, n: int, tokens: int, seed: int) -> float:
    """Write ``n`` units to ``ns``; returns the seconds spent in ``write_unit`` only."""
    store = open_store(url)
    rng = np.random.default_rng(seed)
    triples, parent = [], None
    for i in range(n):
        t = synth_unit(ns, i, parent, tokens, rng)
        triples.append(t)
        parent = t[0].key
    start = time.perf_counter()
    for t in triples:
        store.write_unit(ns, *t)
    spent = time.perf_counter() - start
    store.close()
    return spent


def measure_open(url: str, ns: str) -> dict:
    """In a fresh process: open, notes(), iter_pieces(), one get_unit; peak RSS."""
    code = f"""
import json, resource, time
t0 = time.perf_counter()
from flexamem_core.stores import open_store
t1 = time.perf_counter()
s = open_store({url!r})
t2 = time.perf_counter()
notes = s.notes({ns!r})
t3 = time.perf_counter()
pieces = list(s.iter_pieces({ns!r}))
t4 = time.perf_counter()
s.get_unit({ns!r}, notes[len(notes) // 2].unit_key)
t5 = time.perf_counter()
print(json.dumps({{"open_s": t2 - t1, "notes_s": t3 - t2, "notes": len(notes), "iter_pieces_s": t4 - t3,
                  "pieces": len(pieces), "get_unit_ms": (t5 - t4) * 1000,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_single(name: str, url: str, units: int, tokens: int) -> dict:
    ns = "bench/one"
    spent = write_namespace(url, ns, units, tokens, seed=1)
    result = {"backend": name, "units": units, "tokens_per_unit": tokens,
              "write_units_per_s": units / spent, **measure_open(url, ns)}
    store = open_store(url)
    t = time.perf_counter()
    assert store.write_unit(ns, *synth_unit(ns, 0, None, tokens, np.random.default_rng(1))) is False
    result["rewrite_noop_ms"] = (time.perf_counter() - t) * 1000
    store.close()
    return result


def _worker(args: tuple[str, list[str], int, int]) -> tuple[float, int]:
    url, namespaces, per_ns, tokens = args
    spent = sum(write_namespace(url, ns, per_ns, tokens, seed=hash(ns) & 0xFFFF) for ns in namespaces)
    return spent, len(namespaces) * per_ns


def bench_multi(url: str, namespaces: int, per_ns: int, tokens: int, workers: int) -> dict:
    names = [f"tenant-{i:04d}/thread" for i in range(namespaces)]
    jobs = [(url, names[w::workers], per_ns, tokens) for w in range(workers)]
    start = time.perf_counter()
    with mp.get_context("spawn").Pool(workers) as pool:
        done = pool.map(_worker, jobs)
    wall = time.perf_counter() - start
    store = open_store(url)
    rng = np.random.default_rng(0)
    lat = []
    for ns in rng.choice(names, size=min(50, len(names)), replace=False):
        t = time.perf_counter()
        assert len(store.notes(str(ns))) == per_ns
        lat.append((time.perf_counter() - t) * 1000)
    count = len(store.namespaces())
    store.close()
    return {"namespaces": namespaces, "units_per_namespace": per_ns, "tokens_per_unit": tokens,
            "workers": workers, "wall_s": wall, "units_per_s": sum(n for _, n in done) / wall,
            "notes_ms_p50": statistics.median(lat), "notes_ms_p95": float(np.percentile(lat, 95)),
            "namespaces_listed": count}


def bench_embedding(sample: int) -> dict:
    from flexamem_core.index.embeddings import default_embedder

    emb = default_embedder()
    rng = np.random.default_rng(3)
    texts = [synth_unit("e", i, None, 120, rng)[1].record for i in range(sample)]
    emb.embed(texts[:2])
    t = time.perf_counter()
    for j in range(0, sample, 8):
        emb.embed(texts[j:j + 8])
    return {"embed_records_per_s": sample / (time.perf_counter() - t), "embedder": emb.name}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--units", type=int, default=10_000)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--namespaces", type=int, default=1000)
    ap.add_argument("--per-namespace", type=int, default=100)
    ap.add_argument("--multi-tokens", type=int, default=300)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--embed-sample", type=int, default=0, help="also time the real embedder")
    ap.add_argument("--postgres-url", default=os.environ.get("FLEXAMEM_TEST_POSTGRES_URL"))
    args = ap.parse_args()
    results: dict = {"single": [], "multi": None}
    schemas: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.backends.split(","):
            if name == "sqlite":
                url = f"sqlite:///{tmp}/bench.db"
            elif name == "postgres":
                if not args.postgres_url:
                    sys.exit("PostgreSQL: set FLEXAMEM_TEST_POSTGRES_URL or --postgres-url")
                schema = f"bench_{uuid.uuid4().hex[:8]}"
                schemas.append(schema)
                url = f"{args.postgres_url}?schema={schema}"
            else:
                sys.exit(f"unknown backend {name}")
            results["single"].append(bench_single(name, url, args.units, args.tokens))
            print(json.dumps(results["single"][-1]), flush=True)
        if args.namespaces and args.postgres_url and "postgres" in args.backends:
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            schemas.append(schema)
            results["multi"] = bench_multi(f"{args.postgres_url}?schema={schema}&pool_max=2",
                                           args.namespaces, args.per_namespace, args.multi_tokens,
                                           args.workers)
            print(json.dumps(results["multi"]), flush=True)
    if args.embed_sample:
        results["embedding"] = bench_embedding(args.embed_sample)
        print(json.dumps(results["embedding"]), flush=True)
    if schemas:
        import psycopg
        from psycopg import sql

        with psycopg.connect(args.postgres_url, autocommit=True) as conn:
            for s in schemas:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(s)))


if __name__ == "__main__":
    main()
