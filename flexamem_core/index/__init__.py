"""The per-namespace search index: BM25 over pieces, note and piece vectors, rank fusion,
the embedder, and the snapshot that makes reopening a namespace fast."""
