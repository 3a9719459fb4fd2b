"""`forgeml rag eval` on a real index of standard-library docstrings."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from forgeml.rag.embeddings import MiniLMEmbedder
from forgeml.rag.labelled import first_sentence
from tests.cli.conftest import assert_cli_error, json_out
from tests.conftest import CliResult
from tests.rag.conftest import STDLIB_MODULES, write_stdlib_docs

Cli = Callable[..., CliResult]


def _labelled(path: Path, per_module: int = 4) -> Path:
    """Queries: a public function's first docstring sentence; gold: its module's file."""
    lines = []
    for name in STDLIB_MODULES:
        module = __import__(name)
        found = 0
        for member, value in inspect.getmembers(module, callable):
            doc = inspect.getdoc(value)
            if member.startswith("_") or not doc or found == per_module:
                continue
            if (getattr(value, "__module__", "") or "").lstrip("_") != name:
                continue
            query, _ = first_sentence(doc)
            lines.append(json.dumps({"query": query, "relevant": [f"{name}.md"]}))
            found += 1
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def indexed(cli: Cli, tmp_path: Path, embedder: MiniLMEmbedder) -> Path:
    docs = write_stdlib_docs(tmp_path / "docs")
    assert cli("rag", "index", "std", docs, "--chunk-tokens", "128").code == 0
    return _labelled(tmp_path / "set.jsonl")


def test_eval_reports_the_metrics_of_the_index(cli: Cli, indexed: Path) -> None:
    report = json_out(cli("rag", "eval", "std", "--set", indexed, "--json"))
    assert report["queries"] >= 20 and report["passed"] is True
    assert set(report["metrics"]) == {"recall@10", "precision@10", "mrr", "ndcg@10"}
    assert (report["mode"], report["weight"], report["match"]) == ("hybrid", None, "source")
    # each query's answer is one of six files, which it quotes: it is found
    assert report["metrics"]["recall@10"] > 0.9
    assert report["metrics"]["mrr"] > 0.6
    bm25 = json_out(cli("rag", "eval", "std@v1", "--set", indexed, "--mode", "bm25", "--json"))
    assert bm25["mode"] == "bm25" and bm25["metrics"]["recall@10"] > 0.9
    table = cli("rag", "eval", "std", "--set", indexed, "--k", "3")
    assert table.code == 0 and "recall@3" in table.stdout and "RRF" in table.stdout


def test_tune_finds_the_weight_and_evaluates_with_it(cli: Cli, indexed: Path) -> None:
    report = json_out(cli("rag", "eval", "std", "--set", indexed, "--tune", "--json"))
    alpha = report["tuned"]["alpha"]
    assert 0.0 <= alpha <= 1.0 and report["weight"] == alpha
    fixed = json_out(cli("rag", "eval", "std", "--set", indexed, "--weight", str(alpha), "--json"))
    assert fixed["metrics"] == report["metrics"]
    assert "tuned dense weight" in cli("rag", "eval", "std", "--set", indexed, "--tune").stdout


def test_min_makes_it_a_gate(cli: Cli, indexed: Path) -> None:
    passed = cli("rag", "eval", "std", "--set", indexed, "--min", "recall@10=0.5")
    assert passed.code == 0, passed.stderr
    assert_cli_error(
        cli("rag", "eval", "std", "--set", indexed, "--min", "mrr=0.2", "--min", "ndcg@10=1.01"),
        "ndcg@10 is ",
    )
    assert_cli_error(
        cli("rag", "eval", "std", "--set", indexed, "--min", "ndcg@10=1.01"),
        "below its minimum 1.01",
    )


def test_relevant_ids_may_name_chunks(cli: Cli, indexed: Path, tmp_path: Path) -> None:
    hit = json_out(cli("rag", "query", "std", "Push item onto heap", "--k", "1", "--json"))[0]
    labelled = tmp_path / "chunks.jsonl"
    row = {"query": "Push item onto heap, maintaining the heap invariant.", "relevant": []}
    labelled.write_text(json.dumps(row | {"relevant": [hit["chunk_id"]]}), encoding="utf-8")
    report = json_out(cli("rag", "eval", "std", "--set", labelled, "--match", "chunk", "--json"))
    assert report["metrics"]["mrr"] == 1.0
    assert_cli_error(cli("rag", "eval", "std", "--set", labelled), "names no source of the index")


def test_bad_input_is_one_sentence(cli: Cli, indexed: Path, tmp_path: Path) -> None:
    args = ("rag", "eval", "std", "--set", indexed)
    assert_cli_error(cli(*args, "--min", "ndcg@10"), "METRIC=VALUE", 2)
    assert_cli_error(cli(*args, "--min", "ndcg@10=high"), "METRIC=VALUE", 2)
    assert_cli_error(cli(*args, "--min", "f1=0.5"), "Unknown metric 'f1'", 2)
    assert_cli_error(cli(*args, "--tune", "--mode", "bm25"), "--tune", 2)
    assert_cli_error(cli(*args, "--match", "title"), "--match", 2)
    assert_cli_error(cli(*args, "--mode", "fuzzy"), "Unknown search mode 'fuzzy'", 2)
    assert_cli_error(cli(*args, "--weight", "1.5"), "weight must lie in [0, 1]", 2)
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    assert_cli_error(cli("rag", "eval", "std", "--set", tmp_path / "empty.jsonl"), "no queries")
    assert_cli_error(cli("rag", "eval", "std", "--set", tmp_path / "none.jsonl"), "Cannot read")
    assert_cli_error(cli("rag", "eval", "nope", "--set", indexed), "does not exist")


def test_a_file_name_naming_two_sources_asks_for_more_of_the_path(
    cli: Cli, tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    for folder, text in (("a", "Heaps keep the smallest item first."), ("b", "Shell quoting.")):
        (tmp_path / "kb" / folder).mkdir(parents=True)
        (tmp_path / "kb" / folder / "notes.md").write_text(text, encoding="utf-8")
    assert cli("rag", "index", "kb", tmp_path / "kb").code == 0
    labelled = tmp_path / "set.jsonl"
    labelled.write_text(json.dumps({"query": "heap", "relevant": ["notes.md"]}), encoding="utf-8")
    assert_cli_error(cli("rag", "eval", "kb", "--set", labelled), "matches 2 sources")
    labelled.write_text(json.dumps({"query": "heap", "relevant": ["a/notes.md"]}), encoding="utf-8")
    assert json_out(cli("rag", "eval", "kb", "--set", labelled, "--json"))["metrics"]["mrr"] == 1.0
