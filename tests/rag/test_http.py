"""RAG over HTTP: /v1/rag/{index}/query and /answer on the model server, and through the gateway."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from forgeml.core.config import Settings
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.prompts.registry import create_prompt
from forgeml.prompts.spec import PromptSpec
from forgeml.rag.embeddings import MiniLMEmbedder
from forgeml.rag.http import MAX_TEXT_CHARS, rag_router
from forgeml.rag.options import IndexOptions
from forgeml.rag.serving import GeneratorEndpoint, ServedIndex, close_served, open_served
from forgeml.rag.versions import build_version, open_index
from forgeml.serve import ModelRepository, ServeOptions, build_app
from tests.agents.conftest import ChatServer, chat_server  # noqa: F401  (the fixture)
from tests.rag.conftest import write_stdlib_docs
from tests.serve.conftest import LiveServer

QUESTION = "What does heapq.heappush do?"


@pytest.fixture(scope="module")
def rag_workspace(
    tmp_path_factory: pytest.TempPathFactory, embedder: MiniLMEmbedder
) -> Iterator[Workspace]:
    """A workspace with index `std` (three modules' docs) in two versions: v2 adds shlex."""
    root = tmp_path_factory.mktemp("raghttp")
    workspace = Workspace(Settings(home=root / "home", user="tester"))
    docs = write_stdlib_docs(root / "docs", ("heapq", "bisect", "textwrap"))
    more = write_stdlib_docs(root / "more", ("shlex",))
    options = IndexOptions(chunk_tokens=96)
    build_version(workspace, "std", [str(docs)], options, embedder)
    build_version(workspace, "std", [str(docs), str(more)], options, embedder)
    yield workspace
    workspace.close()


@pytest.fixture(scope="module")
def served(rag_workspace: Workspace) -> Iterator[dict[str, ServedIndex]]:
    indexes = open_served(rag_workspace, ["std@v1"])
    yield indexes
    close_served(indexes)


@pytest.fixture(scope="module")
def chunks(rag_workspace: Workspace) -> dict[str, str]:
    index = open_index(rag_workspace, "std@v1")
    try:
        return {chunk.chunk_id: chunk.text for chunk in index.chunks()}
    finally:
        index.close()


def server_app(
    workspace: Workspace, indexes: dict[str, ServedIndex], generator: GeneratorEndpoint
) -> FastAPI:
    """The model server's app (its models never loaded: no lifespan) with RAG's routes."""
    repository = ModelRepository(workspace, ["smollm2"], ServeOptions(max_body_bytes=64_000))
    return build_app(repository, extra_routers=[rag_router(workspace, indexes, generator)])


@pytest.fixture
def client(
    rag_workspace: Workspace,
    served: dict[str, ServedIndex],
    chat_server: ChatServer,  # noqa: F811
) -> TestClient:
    generator = GeneratorEndpoint(chat_server.url, default_model="smol")
    return TestClient(server_app(rag_workspace, served, generator))


def _reply(answer: str | None, citations: list[dict[str, Any]]) -> str:
    return json.dumps({"answer": answer, "citations": citations})


def test_a_query_answers_what_rag_query_finds(
    client: TestClient, served: dict[str, ServedIndex]
) -> None:
    response = client.post("/v1/rag/std/query", json={"query": QUESTION, "k": 3})

    assert response.status_code == 200, response.text
    body = response.json()
    expected = served["std"].index.search(QUESTION, 3)
    assert body["ref"] == "std@v1" and body["query"] == QUESTION
    assert [hit["chunk_id"] for hit in body["hits"]] == [hit.chunk_id for hit in expected]
    first = body["hits"][0]
    assert set(first) == {"chunk_id", "score", "text", "source", "metadata"}
    assert first["source"].endswith("heapq.md") and first["text"] == expected[0].text


def test_a_query_takes_mode_filter_and_weight(client: TestClient) -> None:
    def ids(**body: Any) -> list[str]:
        response = client.post(
            "/v1/rag/std/query", json={"query": "insert in sorted order", **body}
        )
        assert response.status_code == 200, response.text
        return [hit["source"] for hit in response.json()["hits"]]

    assert len(ids(k=4, mode="bm25")) == 4
    assert len(ids(k=2, mode="dense", weight=None)) == 2
    only = ids(k=5, filter={"format": "md"}, weight=0.5)
    assert only and all(source.endswith(".md") for source in only)
    assert ids(k=5, filter={"format": "pdf"}) == []


def test_the_version_served_is_the_one_named(
    rag_workspace: Workspace,
    chat_server: ChatServer,  # noqa: F811
) -> None:
    indexes = open_served(rag_workspace, ["std"])  # the latest: v2, with shlex
    try:
        generator = GeneratorEndpoint(chat_server.url, default_model="smol")
        client_v2 = TestClient(server_app(rag_workspace, indexes, generator))
        body = client_v2.post("/v1/rag/std/query", json={"query": "shell quoting", "k": 1}).json()
    finally:
        close_served(indexes)
    assert body["ref"] == "std@v2" and body["hits"][0]["source"].endswith("shlex.md")


@pytest.mark.parametrize(
    ("path", "body", "status", "sentence"),
    [
        ("/v1/rag/nosuch/query", {"query": "q"}, 404, "serves no RAG index 'nosuch'"),
        ("/v1/rag/nosuch/answer", {"question": "q"}, 404, "serves no RAG index 'nosuch'"),
        ("/v1/rag/std/query", {"query": "   "}, 422, "at 'query': Value error, it is empty"),
        ("/v1/rag/std/query", {}, 422, "at 'query': Field required"),
        ("/v1/rag/std/query", {"query": "x" * (MAX_TEXT_CHARS + 1)}, 422, "at most 4000"),
        ("/v1/rag/std/query", {"query": "q", "k": 0}, 422, "at 'k'"),
        ("/v1/rag/std/query", {"query": "q", "k": 101}, 422, "at 'k'"),
        ("/v1/rag/std/query", {"query": "q", "k": "many"}, 422, "at 'k'"),
        ("/v1/rag/std/query", {"query": "q", "mode": "fuzzy"}, 422, "at 'mode'"),
        ("/v1/rag/std/query", {"query": "q", "weight": 2}, 422, "at 'weight'"),
        ("/v1/rag/std/query", {"query": "q", "top": 3}, 422, "at 'top': Extra inputs"),
        (
            "/v1/rag/std/query",
            {"query": "q", "filter": {"author": "x"}},
            400,
            "The index has no field 'author' to filter on (its fields: format, section, source).",
        ),
        ("/v1/rag/std/answer", {"question": ""}, 422, "at 'question': Value error, it is empty"),
        ("/v1/rag/std/answer", {"question": "q", "k": 21}, 422, "at 'k'"),
        ("/v1/rag/std/answer", {"question": "q", "max_tokens": 0}, 422, "at 'max_tokens'"),
        (
            "/v1/rag/std/answer",
            {"question": "q", "filter": {"author": "x"}},
            400,
            "The index has no field 'author' to filter on",
        ),
        ("/v1/rag/std/answer", {"question": "q", "prompt": "nosuch"}, 404, "nosuch"),
        ("/v1/rag/std/query", "{not json", 400, "The request body is not valid JSON."),
    ],
)
def test_bad_input_is_one_json_sentence(
    client: TestClient, path: str, body: Any, status: int, sentence: str
) -> None:
    if isinstance(body, str):
        response = client.post(path, content=body, headers={"content-type": "application/json"})
    else:
        response = client.post(path, json=body)

    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error, str) and sentence in error
    assert "Traceback" not in response.text


def test_an_oversized_body_is_refused_whole(client: TestClient) -> None:
    response = client.post("/v1/rag/std/query", json={"query": "q", "filter": {"x": "y" * 70_000}})
    assert response.status_code == 413 and "limit of 64000 bytes" in response.json()["error"]


def test_an_answer_cites_chunks_verbatim_as_rag_answer_does(
    client: TestClient,
    chat_server: ChatServer,  # noqa: F811
    chunks: dict[str, str],
    rag_workspace: Workspace,
) -> None:
    first = client.post("/v1/rag/std/query", json={"query": QUESTION}).json()["hits"][0]
    quote = " ".join(first["text"].split()[:6])
    chat_server.say(_reply("It pushes an item onto the heap [1].", [{"n": 1, "quote": quote}]))

    response = client.post("/v1/rag/std/answer", json={"question": QUESTION, "max_tokens": 64})

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["supported"] is True and body["answer"] == "It pushes an item onto the heap [1]."
    assert body["prompt_ref"] == "builtin:rag-answer@1" and body["ref"] == "std@v1"
    [cited] = body["citations"]
    assert (cited["chunk_id"], cited["source"]) == (first["chunk_id"], first["source"])
    assert cited["quote"] in chunks[cited["chunk_id"]]
    sent = chat_server.requests[-1]
    assert sent["model"] == "smol" and sent["max_tokens"] == 64
    assert sent["response_format"]["type"] == "json_schema"
    event = _last_event(rag_workspace)
    assert (event.action, event.object_ref) == ("rag.answer", "rag:std@v1")
    assert event.payload["chunks"] == [first["chunk_id"]] and event.payload["via"] == "http"
    assert event.payload["prompt_ref"] == "builtin:rag-answer@1"


def _last_event(workspace: Workspace) -> AuditEvent:
    with workspace.store.session() as session:
        event = session.scalars(select(AuditEvent).order_by(AuditEvent.seq.desc())).first()
        assert event is not None
        session.expunge(event)
        return event


def test_an_unsupported_answer_says_so(
    client: TestClient,
    chat_server: ChatServer,  # noqa: F811
) -> None:
    chat_server.say(_reply("It pushes [1].", [{"n": 1, "quote": "words in no passage at all"}]))

    body = client.post("/v1/rag/std/answer", json={"question": QUESTION, "model": "other"}).json()

    assert body["supported"] is False and body["citations"] == []
    assert "No citation in the answer quotes its passage verbatim" in body["refused_reason"]
    assert chat_server.requests[-1]["model"] == "other"  # the request's model answers


def test_an_answer_uses_a_registered_prompt_and_records_its_version(
    client: TestClient,
    chat_server: ChatServer,  # noqa: F811
    rag_workspace: Workspace,
) -> None:
    spec = PromptSpec.model_validate(
        {
            "messages": [
                {"role": "system", "template": "Answer in JSON, citing passages."},
                {"role": "user", "template": "{{ passages }}\nQ: {{ question }}"},
            ],
            "variables": [{"name": "passages"}, {"name": "question"}],
        }
    )
    create_prompt(rag_workspace, "rag-answer", spec)
    unfit = PromptSpec.model_validate(
        {"template": "Q: {{ question }}", "variables": [{"name": "question"}]}
    )
    create_prompt(rag_workspace, "just-question", unfit)
    chat_server.say(_reply(None, []))

    body = client.post(
        "/v1/rag/std/answer", json={"question": QUESTION, "prompt": "rag-answer@v1"}
    ).json()
    refused = client.post(
        "/v1/rag/std/answer", json={"question": QUESTION, "prompt": "just-question"}
    )

    assert body["prompt_ref"] == "rag-answer@v1" and body["supported"] is False
    sent = chat_server.requests[-1]["messages"]
    assert sent[0]["content"] == "Answer in JSON, citing passages."
    assert sent[1]["content"].startswith("[1] (") and sent[1]["content"].endswith(QUESTION)
    assert refused.status_code == 400
    assert "does not declare the variable 'passages'" in refused.json()["error"]


def test_an_unreachable_generator_is_a_502_sentence(
    rag_workspace: Workspace, served: dict[str, ServedIndex]
) -> None:
    generator = GeneratorEndpoint("http://127.0.0.1:9/v1", "smol")
    generator.timeout_s = 2.0
    app_client = TestClient(server_app(rag_workspace, served, generator))

    response = app_client.post("/v1/rag/std/answer", json={"question": QUESTION})

    assert response.status_code == 502
    assert "could not be reached" in response.json()["error"]


def test_without_a_default_model_an_answer_needs_one(
    rag_workspace: Workspace, served: dict[str, ServedIndex]
) -> None:
    app_client = TestClient(server_app(rag_workspace, served, GeneratorEndpoint("http://x/v1")))
    response = app_client.post("/v1/rag/std/answer", json={"question": QUESTION})
    assert response.status_code == 400 and "needs 'model'" in response.json()["error"]


def test_concurrent_queries_share_one_opened_index(client: TestClient) -> None:
    results: list[int] = []
    errors: list[BaseException] = []

    def ask(n: int) -> None:
        try:
            response = client.post("/v1/rag/std/query", json={"query": f"heap item {n}", "k": 2})
            results.append(response.status_code)
        except BaseException as error:  # reported below, from the main thread
            errors.append(error)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and results == [200] * 8


@pytest.mark.slow
def test_smollm2_answers_over_http_with_verbatim_citations_or_refuses(
    rag_workspace: Workspace,
    served: dict[str, ServedIndex],
    chunks: dict[str, str],
    smollm2_server: LiveServer,
) -> None:
    generator = GeneratorEndpoint(f"{smollm2_server.url}/v1", default_model="smollm2")
    app = server_app(rag_workspace, served, generator)
    transport = httpx.ASGITransport(app=app)

    async def ask() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://rag") as http:
            return await http.post(
                "/v1/rag/std/answer", json={"question": QUESTION, "k": 3, "max_tokens": 96}
            )

    response = asyncio.run(ask())

    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == "smollm2" and body["prompt_ref"] == "builtin:rag-answer@1"
    if not body["supported"]:
        assert body["citations"] == [] and body["refused_reason"]
    for citation in body["citations"]:
        assert citation["quote"] in chunks[citation["chunk_id"]]
        assert f"[{citation['n']}]" in body["answer"]
