"""Which way of running all-MiniLM-L6-v2 is fastest here: torch in float32, torch under bfloat16
autocast (the default where the CPU has native bfloat16), or ONNX Runtime (fp32, int8)? (benchmark,
not a test)

sentence-transformers' own ONNX backend (``backend="onnx"``) needs ``optimum-onnx``, whose
releases pin ``transformers<4.58`` while sentence-transformers 6 needs ``transformers>=5``,
so it cannot be installed next to this stack. This script measures the same thing without
it, offline: the packaged model is exported with ``torch.onnx`` (fp32), quantized with
``onnxruntime.quantization.quantize_dynamic`` (int8 weights, what ST's
``export_dynamic_quantized_onnx_model`` does), and run with ONNX Runtime plus the model's
own tokenizer and mean pooling, against ``SentenceTransformer.encode`` on the same texts
(batches of 8 sorted by length, as ``SentenceTransformerEmbedder`` does). Needs ``onnx``
(``pip install onnx``) for the quantization; reports load time, first call, texts per
second for short queries and ~1,000-token units, the cosine agreement with torch, and what
a fresh process pays to import each path (torch and sentence-transformers, or onnxruntime
and tokenizers).

The bfloat16 row runs :class:`~flexamem_core.index.embeddings.SentenceTransformerEmbedder` with
``precision="bfloat16"``, on any CPU (emulated, and slower, where bfloat16 is not native).

    HF_HUB_OFFLINE=1 python tests/benchmarks/bench_embedder_backends.py --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


VOCAB = ("ls", "cd", "grep", "def", "class", "return", "import", "pytest", "error", "path/to/models.py",
         "the", "file", "test", "fails", "because", "a", "value", "is", "missing", "in", "config", "service")


def texts(n: int, words: int, seed: int) -> list[str]:
    """Deterministic word salad of agent-trace words (``words`` words each)."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(VOCAB, size=words)) for _ in range(n)]


def export(model_dir: str, out: Path) -> tuple[Path, Path]:
    """fp32 ONNX of the transformer (input ids, mask, type ids -> token embeddings), and its int8 copy."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    bert = AutoModel.from_pretrained(model_dir).eval()

    class Encoder(torch.nn.Module):  # keyword arguments only: BertModel.forward's order varies by release
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    model = Encoder().eval()
    enc = AutoTokenizer.from_pretrained(model_dir)(["warm up text"], return_tensors="pt")
    fp32, int8 = out / "model.onnx", out / "model_qint8.onnx"
    axes = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(model, (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]), str(fp32),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"], dynamic_axes={
                              "input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                              "last_hidden_state": axes}, opset_version=17, dynamo=False)
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    return fp32, int8


class OrtEmbedder:
    """ONNX Runtime session + tokenizer + mean pooling + L2 norm (the model's own pipeline)."""

    def __init__(self, model_dir: str, onnx_file: Path, threads: int) -> None:
        import onnxruntime as ort
        from transformers import AutoTokenizer

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(onnx_file), opts, providers=["CPUExecutionProvider"])
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)

    def encode(self, batch: list[str]) -> np.ndarray:
        enc = self.tokenizer(batch, padding=True, truncation=True, max_length=256, return_tensors="np")
        feeds = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask", "token_type_ids")}
        hidden = self.session.run(None, feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        vec = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
        return vec / np.linalg.norm(vec, axis=1, keepdims=True)


def import_seconds(code: str) -> float:
    """Wall time of a fresh interpreter importing what a path needs (the real first-load cost)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - start


def throughput(encode, items: list[str], batch: int = 8) -> tuple[float, np.ndarray]:
    ordered = sorted(items, key=len)
    start = time.perf_counter()
    out = np.concatenate([encode(ordered[i:i + batch]) for i in range(0, len(ordered), batch)])
    return len(items) / (time.perf_counter() - start), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch and ONNX Runtime intra-op threads")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--units", type=int, default=48)
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    from flexamem_core.index.embeddings import resolve_model_path

    torch.set_num_threads(args.threads)
    model_dir = resolve_model_path("sentence-transformers/all-MiniLM-L6-v2")
    sets = {"query (~40 tokens)": texts(args.queries, 25, 1),
            "unit (~1,000 tokens, cut at 256)": texts(args.units, 700, 2)}
    results: dict[str, dict[str, float]] = {}

    t0 = time.perf_counter()
    st = SentenceTransformer(model_dir, device="cpu")
    results["torch"] = {"load_s": time.perf_counter() - t0,
                        "fresh_import_s": import_seconds("import sentence_transformers")}
    t0 = time.perf_counter()
    st.encode(["first call"], normalize_embeddings=True)
    results["torch"]["first_call_ms"] = 1000 * (time.perf_counter() - t0)
    reference = {}
    for name, items in sets.items():
        rate, reference[name] = throughput(
            lambda b: st.encode(b, batch_size=8, normalize_embeddings=True, show_progress_bar=False), items)
        results["torch"][f"{name} texts/s"] = rate

    from flexamem_core.index.embeddings import SentenceTransformerEmbedder, native_bfloat16

    results["torch bfloat16 autocast"] = {"native_bfloat16": float(native_bfloat16())}
    for name, items in sets.items():
        bf16 = SentenceTransformerEmbedder(precision="bfloat16")  # its own copy: Linear weights in bfloat16
        bf16.load()
        rate, vecs = throughput(bf16.embed, items)  # embed() batches by 8, like the others
        results["torch bfloat16 autocast"][f"{name} texts/s"] = rate
        results["torch bfloat16 autocast"][f"{name} min cosine vs torch"] = float(
            np.min(np.sum(vecs * reference[name], 1)))

    with tempfile.TemporaryDirectory() as tmp:
        fp32, int8 = export(model_dir, Path(tmp))
        for label, path in (("onnx fp32", fp32), ("onnx int8", int8)):
            t0 = time.perf_counter()
            ort_model = OrtEmbedder(model_dir, path, args.threads)
            results[label] = {"load_s": time.perf_counter() - t0,
                              "fresh_import_s": import_seconds("import onnxruntime, tokenizers")}
            t0 = time.perf_counter()
            ort_model.encode(["first call"])
            results[label]["first_call_ms"] = 1000 * (time.perf_counter() - t0)
            for name, items in sets.items():
                rate, vecs = throughput(ort_model.encode, items)
                results[label][f"{name} texts/s"] = rate
                results[label][f"{name} min cosine vs torch"] = float(np.min(np.sum(vecs * reference[name], 1)))
            results[label]["file_mb"] = path.stat().st_size / 1e6
    print(json.dumps({k: {m: round(v, 4) for m, v in r.items()} for k, r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
