"""`forgeml rag show|versions|query` in remote mode print what they print locally; the
commands that read files or run a model beside the workspace refuse remote mode."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli._served import (
    Forgeml,
    Served,
    assert_queued_as_job,
    assert_same_as_local,
    served_on,
)

READS = [
    ("rag", "versions", "std"),
    ("rag", "versions", "std", "--json"),
    ("rag", "show", "std"),
    ("rag", "show", "std@v1", "--json"),
    ("rag", "query", "std", "insert into a sorted list"),
    ("rag", "query", "std@v1", "insort", "--k", "2", "--mode", "bm25", "--json"),
    ("rag", "query", "std", "sorted", "--mode", "dense", "--filter", "source=nosuch", "--json"),
    # the same sentence and exit code
    ("rag", "show", "nosuch"),
    ("rag", "versions", "nosuch"),
    ("rag", "query", "std@v9", "x"),
    ("rag", "query", "std", "x", "--mode", "fuzzy"),
    ("rag", "query", "std", "x", "--filter", "novalue"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    from forgeml.rag.options import IndexOptions
    from forgeml.rag.versions import build_version
    from tests.rag.conftest import write_stdlib_docs

    with served_on("sqlite", tmp_path_factory) as home:
        docs = write_stdlib_docs(tmp_path_factory.mktemp("docs"), ("bisect",))
        build_version(home.workspace, "std", [str(docs)], IndexOptions(chunk_tokens=96))
        yield home


@pytest.mark.slow
@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_remote_rag_prints_what_local_prints(forgeml: Forgeml, command: tuple[str, ...]) -> None:
    local, remote = forgeml(*command), forgeml.remote(*command)

    assert_same_as_local(local, remote)
    if not local.code:
        assert local.stdout and not local.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("rag", "index", "std", "nosuch-docs/"),
        ("rag", "rebuild", "std"),
        ("rag", "answer", "std", "why?", "--model-url", "http://x/v1", "--model", "m"),
        ("rag", "eval", "std", "--queries", "q.jsonl"),
    ],
)
def test_rag_commands_beside_the_workspace_run_on_the_server_as_jobs(
    forgeml: Forgeml, command: tuple[str, ...]
) -> None:
    assert_queued_as_job(forgeml, command)
