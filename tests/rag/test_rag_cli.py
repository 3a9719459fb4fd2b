"""`forgeml rag ...` in-process (tests/cli mirrors other groups; this group's tests live here)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from forgeml.rag.embeddings import MiniLMEmbedder
from tests.cli.conftest import assert_cli_error, json_out
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "heapq.md").write_text(
        "# heapq\n\nHeap queue algorithm.\n\n## heappush\n\nPush an item onto the heap.",
        encoding="utf-8",
    )
    (folder / "sub" / "shlex.html").write_text(
        "<h1>shlex</h1><p>Split a string using shell-like syntax.</p>", encoding="utf-8"
    )
    return folder


def test_index_query_show_versions_and_rebuild(
    cli: Cli, corpus: Path, embedder: MiniLMEmbedder
) -> None:
    built = json_out(cli("rag", "index", "docs", corpus, "--chunk-tokens", "64", "--json"))
    assert (built["ref"], built["created"], built["documents"]) == ("docs@v1", True, 2)
    hits = json_out(cli("rag", "query", "docs", "push onto a heap", "--k", "2", "--json"))
    assert hits[0]["metadata"]["section"] == "heapq > heappush"
    assert set(hits[0]) == {"chunk_id", "score", "text", "source", "metadata"}
    filtered = json_out(
        cli("rag", "query", "docs", "split", "--filter", "format=html", "--mode", "bm25", "--json")
    )
    assert [h["metadata"]["format"] for h in filtered] == ["html"]
    shown = json_out(cli("rag", "show", "docs@v1", "--json"))
    assert shown["digest"] == built["digest"]
    assert shown["sources"][0]["kind"] == "folder"
    assert [v["ref"] for v in json_out(cli("rag", "versions", "docs", "--json"))] == ["docs@v1"]
    rebuilt = json_out(cli("rag", "rebuild", "docs@v1", "--json"))
    assert rebuilt == {"ref": "docs@v1", "digest": built["digest"], "matches": True}
    again = cli("rag", "index", "docs", corpus, "--chunk-tokens", "64")
    assert again.code == 0 and "unchanged, still docs@v1" in again.stdout + again.stderr


def test_people_get_tables(cli: Cli, corpus: Path, embedder: MiniLMEmbedder) -> None:
    assert cli("rag", "index", "docs", corpus).code == 0
    for args in (("query", "docs", "heap"), ("show", "docs"), ("versions", "docs")):
        result = cli("rag", *args)
        assert result.code == 0, result.stderr
        assert "docs" in result.stdout


def test_bad_input_is_one_sentence(cli: Cli, corpus: Path, tmp_path: Path) -> None:
    assert_cli_error(cli("rag", "index", "docs", tmp_path / "nowhere"), "does not exist")
    (tmp_path / "empty").mkdir()
    assert_cli_error(cli("rag", "index", "docs", tmp_path / "empty"), "no text to index")
    assert_cli_error(cli("rag", "show", "docs"), "RAG index 'docs' does not exist")
    assert cli("rag", "index", "docs", corpus).code == 0
    assert_cli_error(
        cli("rag", "query", "docs", "heap", "--filter", "author=guido"),
        "The index has no field 'author' to filter on",
    )
    assert_cli_error(cli("rag", "query", "docs", "heap", "--filter", "author"), "KEY=VALUE", 2)
    assert_cli_error(cli("rag", "show", "docs@v9"), "has no version v9")
    assert_cli_error(cli("rag", "query", "docs", "heap", "--k", "0"), "k must be at least 1", 2)
    (corpus / "heapq.md").write_text("# heapq\n\nRewritten since.", encoding="utf-8")
    assert_cli_error(cli("rag", "rebuild", "docs@v1"), "changed since it was built")
    assert json.loads(cli("rag", "versions", "docs", "--json").stdout)[0]["ref"] == "docs@v1"
