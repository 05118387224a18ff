"""Run items x methods x budgets, in worker processes, with a progress bar.

Each item (a conversation with its questions, or a trajectory) is evaluated by one worker
for every method and budget, so whatever a method writes about a history is written once
and rendered at every budget. Workers return plain records; the parent aggregates them.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flexamem_core import FlexAMemConfig, Message
from flexamem_core.cache.breakpoints import BreakpointCache, host_marks
from flexamem_core.cache.prefix import common_prefix_tokens
from flexamem_core.request.counting import PER_REQUEST
from flexamem_core.write.units import reader_blocks

from .actions import trajectory_targets
from .items import ConversationItem, Item, TrajectoryItem
from .methods import make_method, method_class
from .methods.base import Env, WriteCost
from .metrics import EvidenceTurn, evidence_shown, score_step


@dataclass(frozen=True)
class Spec:
    """What to run: dataset name, budgets, method names, whether to keep rendered texts."""

    dataset: str
    budgets: tuple[int, ...]
    methods: tuple[str, ...]
    dump: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    #: Directory of the on-disk embedding cache (:mod:`flexamem_eval.embedding_cache`); None: off.
    embedding_cache: str | None = None
    #: Share what methods write about a history (the core's notes in one store, reader units,
    #: PaMER's archive) across methods and budgets of an item; False gives every method (and,
    #: for trajectories, every budget) its own, to check that sharing changes no result.
    reuse: bool = True
    #: Trajectories: a reused detail is near when one of this many observations before its
    #: action holds it, far otherwise (``reused_detail_recall_far``).
    near: int = 2


@dataclass(slots=True)
class RenderRecord:
    """One rendered context and what the metrics found in it.

    Trajectories: one record per model call whose history exceeds B_bar, with ``cached``,
    the tokens at its start that a prompt cache reuses from the previous call of the same
    method and budget (:class:`~flexamem_core.cache.prefix.CacheMeter`).
    """

    method: str
    budget: int
    item_id: str
    group: str
    tokens: int
    ms: float
    step: int | None = None
    evidence_full: int = 0
    evidence_part: int = 0
    evidence_turns: int = 0
    all_evidence: bool | None = None
    reused_hits: int = 0
    reused_total: int = 0
    trace_hits: int = 0
    trace_total: int = 0
    far_hits: int = 0
    far_total: int = 0
    cached: int | None = None
    #: The same call's cached tokens where the provider caches only at marked places
    #: (:class:`~flexamem_core.cache.breakpoints.BreakpointCache`).
    cached_marked: int | None = None
    #: Trajectories: whether the task (first user message) was sent verbatim.
    task_kept: bool | None = None


@dataclass(slots=True)
class WriteRecord:
    method: str
    item_id: str
    ms: float
    units: int
    llm_calls: int


@dataclass
class ItemResult:
    renders: list[RenderRecord] = field(default_factory=list)
    writes: list[WriteRecord] = field(default_factory=list)
    dumps: list[dict[str, Any]] = field(default_factory=list)
    questions: int = 0
    abstentions: int = 0
    #: Texts this item's embedding requests found in the disk cache / had the model embed.
    embeddings_cached: int = 0
    embeddings_computed: int = 0
    seconds: float = 0.0
    #: Wall seconds each method took on this item (writing and every render, all budgets).
    method_seconds: dict[str, float] = field(default_factory=dict)


_ENV: Env | None = None
_ENV_KEY: tuple[str, str | None] | None = None
_WARM: set[str] = set()


def _warm(name: str, env: Env) -> None:
    if name not in _WARM:
        method_class(name).warm(env)
        _WARM.add(name)


def _env(spec: Spec) -> Env:
    """The process's shared environment for a spec's config and embedding cache (made once)."""
    global _ENV, _ENV_KEY
    key = (json.dumps(spec.config, sort_keys=True, default=str), spec.embedding_cache)
    if _ENV is None or key != _ENV_KEY:
        from flexamem_core.request.tokens import default_tokenizer

        _ENV = Env(tokenizer=default_tokenizer(), config=FlexAMemConfig(**spec.config),
                   embedder_factory=embedder_factory(spec.embedding_cache))
        _ENV_KEY = key
    return _ENV


def embedder_factory(cache_dir: str | None) -> Callable[[], Any] | None:
    """The shared MiniLM embedder, behind the disk cache in ``cache_dir`` when one is given."""
    if cache_dir is None:
        return None

    def make() -> Any:
        from flexamem_core.index.embeddings import default_embedder

        from .embedding_cache import CachedEmbedder

        return CachedEmbedder(default_embedder(), cache_dir)

    return make


def _embed_counts(env: Env) -> tuple[int, int]:
    """(cached, computed) texts so far, when the embedder keeps count (the disk cache does)."""
    emb = env.__dict__.get("embedder")  # not created yet: nothing embedded
    return (getattr(emb, "hits", 0), getattr(emb, "misses", 0)) if emb is not None else (0, 0)


Tick = Callable[[float], None]


def item_size(item: Item) -> int:
    """Progress units of an item: its questions, or one trajectory."""
    return len(item.questions) if isinstance(item, ConversationItem) else 1


def evaluate_item(item: Item, spec: Spec, env: Env | None = None, tick: Tick | None = None) -> ItemResult:
    """Every method and budget of the spec on one item; ``tick`` reports progress in item units."""
    env = env or _env(spec)
    tick = tick or (lambda _: None)
    t0 = time.perf_counter()
    before = _embed_counts(env)
    res = _conversation(item, spec, env, tick) if isinstance(item, ConversationItem) \
        else _trajectory(item, spec, env, tick)
    after = _embed_counts(env)
    res.embeddings_cached, res.embeddings_computed = after[0] - before[0], after[1] - before[1]
    res.seconds = time.perf_counter() - t0
    return res


def _dump(spec: Spec, item_id: str, method: str, budget: int, step: int | None,
          text: str, tokens: int) -> dict[str, Any]:
    row = {"dataset": spec.dataset, "item_id": item_id, "method": method, "budget": budget,
           "context_text": text, "context_tokens": tokens}
    if step is not None:
        row["step"] = step
    return row


def _conversation(item: ConversationItem, spec: Spec, env: Env, tick: Tick) -> ItemResult:
    out = ItemResult(questions=len(item.questions), abstentions=sum(q.abstention for q in item.questions))
    by_id = {m.metadata.get("turn"): m for m in item.history}
    turns = {q.item_id: [EvidenceTurn.build(t, item.turn_text[t], env.tokenizer,
                                            reader_blocks([by_id[t]])[0].header)
                         for t in q.evidence if t in by_id]
             for q in item.questions if not q.abstention}
    shared: dict[str, Any] = {}
    for name in spec.methods:
        _warm(name, env)
        started = time.perf_counter()
        if not spec.reuse:
            shared = {}
        method = make_method(name, env, shared)
        t0 = time.perf_counter()
        method.write(item.history)
        ms = method.cost.ms if method.cost.units else (time.perf_counter() - t0) * 1000
        units = method.cost.units or len(method.reader_units())
        out.writes.append(WriteRecord(name, item.history_id, ms, units, method.cost.llm_calls))
        for q in item.questions:
            for budget in spec.budgets:
                t0 = time.perf_counter()
                context = method.question_context(q, budget)
                ms = (time.perf_counter() - t0) * 1000
                text = env.context_text(context)
                tokens = env.count(context)
                rec = RenderRecord(name, budget, q.item_id, q.group, tokens, ms)
                if turns.get(q.item_id):
                    ev = evidence_shown(text, turns[q.item_id])
                    rec.evidence_full, rec.evidence_part = sum(ev.full), sum(ev.part)
                    rec.evidence_turns, rec.all_evidence = len(ev.full), ev.all_shown
                out.renders.append(rec)
                if spec.dump:
                    out.dumps.append(_dump(spec, q.item_id, name, budget, None, text, tokens))
            tick(1 / len(spec.methods))
        out.method_seconds[name] = time.perf_counter() - started
    return out


def _trajectory(item: TrajectoryItem, spec: Spec, env: Env, tick: Tick) -> ItemResult:
    """Every method renders before every model call (each assistant message), one budget after
    the other with a fresh instance, so a stateful method sees one budget's calls in order.

    Calls whose history fits B_bar pass through; they are rendered too (as a live agent
    renders every call) and are the previous request of the prompt-cache meter, but only
    calls whose history exceeds B_bar are recorded and measured.
    """
    out = ItemResult()
    messages: Sequence[Message] = item.messages
    targets = trajectory_targets(messages, spec.near)  # one per assistant message, i.e. per model call
    sizes = {t.step: env.count(messages[: t.message_index]) for t in targets}
    shared: dict[str, Any] = {}
    for name in spec.methods:
        _warm(name, env)
        started = time.perf_counter()
        costs: dict[int, WriteCost] = {}
        for budget in spec.budgets:
            if not spec.reuse:
                shared = {}
            method = make_method(name, env, shared)
            meter = PrefixMeter(env)
            marked = BreakpointCache(env.tokenizer)
            limit = env.effective(budget)
            for target in targets:
                history = list(messages[: target.message_index])
                t0 = time.perf_counter()
                context = method.step_context(history, budget)
                ms = (time.perf_counter() - t0) * 1000
                tokens = env.count(context)
                cached = meter.add(context, tokens)
                cached_marked = min(tokens, marked.add(context, host_marks(context)))
                if sizes[target.step] <= limit:
                    continue
                text = env.context_text(context)
                res = score_step(text, target)
                out.renders.append(RenderRecord(
                    name, budget, item.item_id, "all", tokens, ms, step=target.step,
                    reused_hits=res.reused_hits, reused_total=res.reused_total,
                    trace_hits=res.trace_hits, trace_total=res.trace_total, far_hits=res.far_hits,
                    far_total=res.far_total, cached=cached, cached_marked=cached_marked,
                    task_kept=res.task_kept))
                if spec.dump:
                    out.dumps.append(_dump(spec, item.item_id, name, budget, target.step, text, tokens))
            costs[id(method.cost)] = method.cost  # methods of one item may share one cost
        units = sum(c.units for c in costs.values())
        if units:
            out.writes.append(WriteRecord(name, item.item_id, sum(c.ms for c in costs.values()), units,
                                          sum(c.llm_calls for c in costs.values())))
        else:  # writes nothing: zero cost over the trajectory's units
            out.writes.append(WriteRecord(name, item.item_id, 0.0, _unit_count(env, messages), 0))
        tick(1 / len(spec.methods))
        out.method_seconds[name] = time.perf_counter() - started
    return out


class PrefixMeter:
    """:class:`~flexamem_core.cache.prefix.CacheMeter`'s cached tokens of each call, with the
    leading messages that are the previous call's very objects counted from the shared
    counter's cache: :func:`~flexamem_core.cache.prefix.common_prefix_tokens` reuses such
    a message whole (same role, text and ids), so only the rest goes to it."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self._previous: list[Message] = []

    def add(self, messages: Sequence[Message], tokens: int) -> int:
        """Account one request of ``tokens`` tokens; returns its cached tokens."""
        previous, current = self._previous, list(messages)
        self._previous = current
        if not previous or not current:
            return 0
        k = 0
        for a, b in zip(previous, current):
            if a is not b:
                break
            k += 1
        same = self.env.count(current[:k]) - PER_REQUEST if k else 0
        rest = common_prefix_tokens(previous[k:], current[k:], self.env.tokenizer) - PER_REQUEST \
            if k < len(previous) and k < len(current) else 0
        return min(tokens, PER_REQUEST + same + rest)


def _unit_count(env: Env, messages: Sequence[Message]) -> int:
    from flexamem_core.write.units import pack_units

    from .methods.base import split_prefix

    rest = split_prefix(messages)[1]
    return len(pack_units(rest, "agent", env.tokenizer, env.config.tuning.agent_unit_tokens))


def limit_threads(threads: int) -> None:
    """Intra-op threads of torch (the embedder) in this process.

    More threads than free cores make torch's thread pool spin against itself, and an
    embedding-bound method then runs far slower than with one thread. Set before torch
    loads (``OMP_NUM_THREADS``) or after (``set_num_threads``).
    """
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)


def _init_worker(config: dict[str, Any], threads: int | None, embedding_cache: str | None = None) -> None:
    """Load the tokenizer once per worker process; bound its torch threads."""
    if threads:
        limit_threads(threads)
    _env(Spec(dataset="", budgets=(), methods=(), config=config, embedding_cache=embedding_cache))


def worker_threads(workers: int, threads: int | None = None) -> int | None:
    """Torch threads per process: ``threads`` if given; else, for several workers, the cores
    shared out among them (unless ``OMP_NUM_THREADS`` is set); else torch's own default."""
    if threads:
        return threads
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        return max(1, (os.cpu_count() or 1) // workers)
    return None


def run(items: Sequence[Item], spec: Spec, workers: int = 1, progress: bool = True,
        on_result: Callable[[ItemResult], None] | None = None, threads: int | None = None) -> list[ItemResult]:
    """Evaluate items, in ``workers`` processes when more than one; results in item order.

    ``threads``: torch threads per process (see :func:`worker_threads`)."""
    from tqdm.auto import tqdm

    results: list[ItemResult | None] = [None] * len(items)
    unit = "question" if items and isinstance(items[0], ConversationItem) else "trajectory"
    total = sum(item_size(it) for it in items)
    # disable=None: no bar where stderr is not a terminal (a log file, CI)
    bar = tqdm(total=total, desc=f"{spec.dataset}", unit=unit, disable=None if progress else True,
               bar_format="{l_bar}{bar}| {n:.0f}/{total_fmt} [{elapsed}<{remaining}{postfix}]")
    render_ms: list[float] = []
    shown = [0.0]

    def advance(to: float) -> None:
        bar.update(to - shown[0])
        shown[0] = to

    def done(i: int, res: ItemResult) -> None:
        results[i] = res
        render_ms.extend(r.ms for r in res.renders)
        if on_result:
            on_result(res)
        advance(sum(item_size(it) for it, r in zip(items, results, strict=True) if r is not None))
        if render_ms:
            bar.set_postfix(renders=len(render_ms), render_ms_mean=f"{sum(render_ms) / len(render_ms):.1f}")

    per_worker = worker_threads(workers, threads)
    if workers <= 1:
        if per_worker:
            limit_threads(per_worker)
        for i, item in enumerate(items):
            base = shown[0]
            size = item_size(item)
            part = [0.0]

            def tick(fraction: float, base: float = base, size: int = size, part: list = part) -> None:
                part[0] += fraction
                advance(base + min(part[0], 1.0) * size)

            done(i, evaluate_item(item, spec, tick=tick))
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                 initargs=(spec.config, per_worker, spec.embedding_cache)) as pool:
            futures = {pool.submit(evaluate_item, item, spec): i for i, item in enumerate(items)}
            for fut in as_completed(futures):
                done(futures[fut], fut.result())
    bar.close()
    return [r for r in results if r is not None]


def write_dumps(path: Path, results: Iterable[ItemResult]) -> int:
    """Append every dumped render as one JSON line; returns the number written."""
    n = 0
    with path.open("a", encoding="utf-8") as f:
        for res in results:
            for row in res.dumps:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    return n
