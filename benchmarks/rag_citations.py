"""Benchmark of issue 14's citation figure: `rag answer` on the stdlib set, SmolLM2 served.

The question asks which standard-library object does what a docstring's first sentence
says (forgeml.rag.labelled.stdlib_set: that object's document is the gold one). The
documents (each question's gold one and evenly spread others) are indexed by forgeml
(`build_version`); each question retrieves its top 3 chunks (hybrid) and SmolLM2-135M-Instruct,
served by forgeml (`create_app`, uvicorn in a thread, 4 requests at once), answers through
`forgeml.rag.answer`, in the same run:

- constrained: forgeml's server enforces `answer`'s JSON schema, whose quotes are the
  passages' own sentences (`forgeml.rag._quotes`);
- the baseline: the same prompt and model with no `response_format` (what any
  OpenAI-compatible server that ignores the schema gives), read by the same parser.

Per path: answers supported; claimed quotes that occur verbatim in their passage; citations
of the returned answers that resolve (goal 100%); questions whose answer cites a chunk of
the gold document (goal >= 80%), and the ceiling retrieval sets (the gold document among
the 3 passages).

    PYTHONPATH=src .venv/bin/python benchmarks/rag_citations.py            # 30 questions
    PYTHONPATH=src .venv/bin/python benchmarks/rag_citations.py --quick    # 4 questions
    PYTHONPATH=src .venv/bin/python benchmarks/rag_citations.py --json     # JSON object last
"""

from __future__ import annotations

import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _cli import make_parser, print_json
from _lm_server import cached_model_home, serving
from forgeml.rag.labelled import Document, LabelledSet, Query, stdlib_set

K, MAX_TOKENS, CONCURRENCY = 3, 192, 4
GOALS = {"citations_resolve": 1.0, "cited_gold": 0.80}


def pick(labelled: LabelledSet, queries: int, documents: int) -> LabelledSet:
    """`queries` evenly spread questions, their gold documents and others up to `documents`."""
    step = max(1, len(labelled.queries) // queries)
    kept = labelled.queries[::step][:queries]
    gold = {doc_id for query in kept for doc_id in query.relevant}
    others = [d for d in labelled.documents if d.id not in gold]
    spread = others[:: max(1, len(others) // max(1, documents - len(gold)))]
    chosen = [d for d in labelled.documents if d.id in gold] + spread
    return LabelledSet(labelled.name, chosen[:documents], kept)


def question_of(query: Query) -> str:
    return f"Which Python standard library function or class does this: {query.text}"


def index_documents(documents: list[Document], folder: Path) -> tuple[Any, Any, dict[str, str]]:
    """An open forgeml index over `documents` and each source path's document id."""
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.rag import build_version, open_index

    docs = folder / "docs"
    docs.mkdir(parents=True)
    by_source = {}
    for number, document in enumerate(documents):
        path = docs / f"{number:05d}.txt"
        path.write_text(document.text, encoding="utf-8")
        by_source[f"docs/{path.name}"] = document.id  # named below its folder
    workspace = Workspace(Settings(home=folder / "home", user="bench"))
    build_version(workspace, "stdlib", [str(docs)])
    return workspace, open_index(workspace, "stdlib"), by_source


class _NoSchema:
    """The served model asked without `response_format`: the baseline path."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def chat(self, messages: list[dict[str, Any]], **options: Any) -> Any:
        options.pop("response_format", None)
        return self.client.chat(messages, **options)


def run_path(
    model: Any, labelled: LabelledSet, retrieved: list[list[Any]], gold_sources: list[set[str]]
) -> dict[str, Any]:
    """Answer every question with `model`; the path's counts and rates."""
    from forgeml.rag.answer import answer
    from forgeml.rag.passages import passages_of

    def one(n: int) -> dict[str, Any]:
        passages = passages_of(retrieved[n])
        sources = {p.chunk_id: hit.source for p, hit in zip(passages, retrieved[n], strict=True)}
        result = answer(question_of(labelled.queries[n]), passages, model, max_tokens=MAX_TOKENS)
        claimed = resolving = 0
        for drop in result.dropped:
            claimed += bool(drop.quote)
        for citation in result.citations:
            claimed += 1
            passage = passages[citation.n - 1]
            # checked here on its own terms, not by the function `answer` used: the
            # chunk id is the passage's and the span it names holds the quote
            resolving += (
                citation.chunk_id == passage.chunk_id
                and passage.text[citation.start : citation.end] == citation.quote
            )
        return {
            "supported": result.supported,
            "claimed": claimed,
            "verbatim": len(result.citations),
            "resolving": resolving,
            "cited_gold": any(sources[c.chunk_id] in gold_sources[n] for c in result.citations),
            "tokens": result.usage.completion_tokens,
        }

    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        rows = list(pool.map(one, range(len(labelled.queries))))
    seconds = time.perf_counter() - started
    questions = len(rows)
    cited = sum(r["verbatim"] for r in rows)
    claimed = sum(r["claimed"] for r in rows)
    return {
        "questions": questions,
        "supported": sum(r["supported"] for r in rows) / questions,
        "quotes_claimed": claimed,
        "quotes_verbatim": cited / claimed if claimed else 0.0,
        "citations_resolve": (sum(r["resolving"] for r in rows) / cited) if cited else 1.0,
        "cited_gold": sum(r["cited_gold"] for r in rows) / questions,
        "seconds": seconds,
        "output_tokens": sum(r["tokens"] for r in rows),
    }


def main() -> None:
    parser = make_parser(__doc__, "4 questions over 150 documents instead of 30 over 600")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # the server decodes; more threads than free cores spin
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    from forgeml.prompts.client import ChatClient

    queries, documents = (4, 150) if args.quick else (30, 600)
    labelled = pick(stdlib_set(), queries, documents)
    with tempfile.TemporaryDirectory(prefix="forgeml-bench-cite-") as scratch:
        home = cached_model_home()
        index_workspace, index, by_source = index_documents(labelled.documents, Path(scratch))
        try:
            retrieved = [index.search(question_of(q), K, "hybrid") for q in labelled.queries]
        finally:
            index.close()
            index_workspace.close()
        sources = {doc_id: source for source, doc_id in by_source.items()}
        gold = [{sources[d] for d in q.relevant} for q in labelled.queries]
        ceiling = sum(
            any(hit.source in gold[n] for hit in hits) for n, hits in enumerate(retrieved)
        ) / len(retrieved)
        with serving(home, CONCURRENCY) as url:
            client = ChatClient(f"{url}/v1", "smollm2", timeout_s=600.0)
            paths = {
                "constrained": run_path(client, labelled, retrieved, gold),
                "baseline (no schema)": run_path(_NoSchema(client), labelled, retrieved, gold),
            }
    print(f"{len(labelled.queries)} questions, {len(labelled.documents)} documents, top {K}")
    print(f"gold document among the passages: {ceiling:.0%} (the ceiling of 'cites gold')")
    print(
        f"{'path':<22}{'supported':>10}{'verbatim':>10}{'resolve':>9}{'cites gold':>12}"
        f"{'seconds':>9}"
    )
    for name, row in paths.items():
        print(
            f"{name:<22}{row['supported']:>10.0%}{row['quotes_verbatim']:>10.0%}"
            f"{row['citations_resolve']:>9.0%}{row['cited_gold']:>12.0%}{row['seconds']:>9.1f}"
        )
    print_json(
        args,
        {
            "questions": len(labelled.queries),
            "documents": len(labelled.documents),
            "k": K,
            "max_tokens": MAX_TOKENS,
            "retrieval_ceiling": ceiling,
            "paths": paths,
            "goals": GOALS,
        },
    )


if __name__ == "__main__":
    main()
