"""`forgeml rag show|versions|query` in remote mode print what they print locally; the
commands that read files or run a model beside the workspace run on the server as jobs,
and an index of an uploaded folder rebuilds after the job's folder is gone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.conftest import ChatServer, chat_server  # noqa: F401  (the fixture)
from tests.cli._served import (
    Forgeml,
    Served,
    assert_queued_as_job,
    assert_same_as_local,
    scheduling,
    served_on,
)
from tests.train.conftest import SRC

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


@pytest.mark.slow
def test_an_index_of_an_uploaded_folder_rebuilds_after_the_jobs_folder_is_removed(
    forgeml: Forgeml,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    chat_server: ChatServer,  # noqa: F811
) -> None:
    from tests.rag.conftest import write_stdlib_docs

    # the jobs are this interpreter's `python -m forgeml.cli`, importing this tree
    monkeypatch.setenv("PYTHONPATH", str(SRC))
    docs = write_stdlib_docs(tmp_path / "docs", ("heapq",))
    (docs / "more").mkdir()
    (docs / "more" / "notes.md").write_text("# Notes\n\nA heap keeps its least item first.\n")
    index = ("rag", "index", "up", str(docs), "--chunk-tokens", "96", "--json")
    question = ("up", "What does a heap keep first?")
    with scheduling(forgeml.served):
        indexed = forgeml.remote(*index)
        assert indexed.code == 0, indexed
        built = json.loads(indexed.stdout.partition("\n")[2])  # after its progress line
        rebuilt_there = forgeml.remote("rag", "rebuild", "up@v1", "--json")
        hits = json.loads(forgeml.remote("rag", "query", *question, "--json").stdout)
        quote = " ".join(hits[0]["text"].split()[:4])
        chat_server.say(json.dumps({"answer": "Its least item [1].", "citations": [
            {"n": 1, "quote": quote}]}))  # fmt: skip
        url = ("--model-url", chat_server.url, "--model", "m", "--json")
        answered = forgeml.remote("rag", "answer", *question, *url)

    uploaded = Path(built["sources"][0]["spec"])
    assert uploaded.parent.parent == (forgeml.served.home / "commands").resolve()
    assert not uploaded.exists()  # removed when the job ended
    assert "kept" in built["sources"][0] and built["documents"] == 2
    rebuilt_here = forgeml("rag", "rebuild", "up@v1", "--json")
    expected = {"ref": "up@v1", "digest": built["digest"], "matches": True}
    assert rebuilt_there.code == rebuilt_here.code == 0, (rebuilt_there, rebuilt_here)
    assert json.loads(rebuilt_there.stdout.partition("\n")[2]) == expected
    assert json.loads(rebuilt_here.stdout) == expected
    # hits and citations name the documents as the caller sees them, not the job's folder
    assert {hit["source"] for hit in hits} == {"docs/heapq.md", "docs/more/notes.md"}
    assert answered.code == 0, answered
    [cited] = json.loads(answered.stdout)["citations"]
    assert cited["source"] == hits[0]["source"]
    # the same folder indexed here: the same snapshot, digest included
    local = json.loads(forgeml(*index[:2], "here", *index[3:]).stdout)
    same = ("digest", "chunks", "documents", "config")
    assert {k: local[k] for k in same} == {k: built[k] for k in same}
    assert [s["kind"] for s in local["sources"]] == [s["kind"] for s in built["sources"]]
