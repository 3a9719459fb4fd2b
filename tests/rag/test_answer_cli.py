"""`forgeml rag answer`: retrieve -> rag.answer -> citations printed, each a verbatim span."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.rag.embeddings import MiniLMEmbedder
from forgeml.rag.versions import open_index
from tests.agents.conftest import ChatServer, chat_server  # noqa: F401  (the fixture)
from tests.cli.conftest import assert_cli_error, json_out
from tests.conftest import CliResult
from tests.rag.conftest import write_stdlib_docs
from tests.serve.conftest import LiveServer

Cli = Callable[..., CliResult]
QUESTION = "What does heapq.heappush do?"


@pytest.fixture
def indexed(cli: Cli, tmp_path: Path, embedder: MiniLMEmbedder) -> dict[str, str]:
    """Index `std` of three modules' docs; returns chunk id -> text of every chunk."""
    docs = write_stdlib_docs(tmp_path / "docs", ("heapq", "bisect", "textwrap"))
    assert cli("rag", "index", "std", docs, "--chunk-tokens", "96").code == 0
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    index = open_index(workspace, "std")
    try:
        return {chunk.chunk_id: chunk.text for chunk in index.chunks()}
    finally:
        index.close()
        workspace.close()


def _answer(cli: Cli, url: str, model: str, *extra: str) -> CliResult:
    return cli("rag", "answer", "std", QUESTION, "--model-url", url, "--model", model, *extra)


def _reply(answer: str | None, citations: list[dict[str, Any]]) -> str:
    return json.dumps({"answer": answer, "citations": citations})


def test_an_answer_prints_citations_that_quote_the_index(
    cli: Cli,
    indexed: dict[str, str],
    chat_server: ChatServer,  # noqa: F811
) -> None:
    first = json_out(cli("rag", "query", "std", QUESTION, "--k", "5", "--json"))[0]
    quote = " ".join(first["text"].split()[:6])
    chat_server.say(_reply("It pushes an item onto the heap [1].", [{"n": 1, "quote": quote}]))

    result = json_out(_answer(cli, chat_server.url, "smol", "--json"))

    assert result["supported"] is True and result["prompt_ref"] == "builtin:rag-answer@1"
    [cited] = result["citations"]
    assert (cited["n"], cited["chunk_id"], cited["source"]) == (
        1,
        first["chunk_id"],
        first["source"],
    )
    assert cited["quote"] in first["text"]  # the verbatim span, its own line breaks kept
    assert " ".join(cited["quote"].split()) == quote
    sent = chat_server.requests[0]
    assert sent["model"] == "smol" and sent["response_format"]["type"] == "json_schema"
    assert first["text"] in sent["messages"][-1]["content"]
    event = json_out(cli("audit", "log", "--limit", "1", "--json"))[-1]
    assert (event["action"], event["object"]) == ("rag.answer", "rag:std")
    assert event["payload"]["prompt_ref"] == "builtin:rag-answer@1"
    assert event["payload"]["chunks"] == [first["chunk_id"]]


def test_people_see_the_answer_its_citations_or_the_refusal(
    cli: Cli,
    indexed: dict[str, str],
    chat_server: ChatServer,  # noqa: F811
) -> None:
    first = json_out(cli("rag", "query", "std", QUESTION, "--k", "5", "--json"))[0]
    quote = " ".join(first["text"].split()[:6])
    chat_server.say(_reply("It pushes [1].", [{"n": 1, "quote": quote}]))
    shown = _answer(cli, chat_server.url, "smol")
    assert shown.code == 0, shown.stderr
    assert f"[1] {first['chunk_id']}" in shown.stdout and "builtin:rag-answer@1" in shown.stdout

    chat_server.say(_reply("It pushes [1].", [{"n": 1, "quote": "words in no passage at all"}]))
    refused = _answer(cli, chat_server.url, "smol")
    assert refused.code == 0 and "do not support an answer" in refused.stdout
    assert "No citation in the answer quotes its passage verbatim" in refused.stdout


def test_bad_input_is_one_sentence(
    cli: Cli, indexed: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FORGEML_TEST_NO_KEY", raising=False)
    url = "http://127.0.0.1:9/v1"
    assert_cli_error(
        _answer(cli, url, "smol", "--api-key-env", "FORGEML_TEST_NO_KEY"),
        "FORGEML_TEST_NO_KEY holding the API key is not set",
    )
    assert_cli_error(
        cli("rag", "answer", "nope", QUESTION, "--model-url", url, "--model", "m"),
        "does not exist",
    )
    assert_cli_error(
        cli("rag", "answer", "std", "  ", "--model-url", url, "--model", "m"),
        "The question is empty",
    )
    assert_cli_error(_answer(cli, url, "smol"), f"The language model at {url} could not be reached")


def test_an_endpoint_that_fails_is_one_sentence(
    cli: Cli,
    indexed: dict[str, str],
    chat_server: ChatServer,  # noqa: F811
) -> None:
    # nothing scripted: the server answers 500, and the client's retries give up
    assert_cli_error(
        _answer(cli, chat_server.url, "smol"),
        "refused the request (HTTP 500): The script has no reply left.",
    )


@pytest.mark.slow
def test_smollm2_over_http_cites_the_index_verbatim(
    cli: Cli, indexed: dict[str, str], smollm2_server: LiveServer
) -> None:
    """forgeml's server enforces the answer schema, whose quotes are the passages' own
    sentences: SmolLM2 paraphrased 17 of 20 quotes without it, and every answer was refused."""
    url = f"{smollm2_server.url}/v1"
    result = json_out(_answer(cli, url, "smollm2", "--k", "3", "--max-tokens", "192", "--json"))

    assert result["prompt_ref"] == "builtin:rag-answer@1"
    assert result["supported"] is True, result["refused_reason"]
    assert result["citations"]
    for citation in result["citations"]:
        assert citation["quote"] in indexed[citation["chunk_id"]]
        assert f"[{citation['n']}]" in result["answer"]


def test_the_answer_schema_is_one_forgemls_server_can_enforce() -> None:
    from forgeml.rag.answer import RESPONSE_FORMAT
    from forgeml.serve.structured import check_schema

    check_schema(RESPONSE_FORMAT["json_schema"]["schema"])  # it refused `minimum` with a 400
