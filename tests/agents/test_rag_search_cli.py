"""`forgeml agent run` with `rag_search` over a real RAG index, through the OpenAI client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from forgeml.rag.embeddings import default_embedder
from tests.agents.conftest import ChatServer
from tests.agents.test_cli import agent_cli  # noqa: F401  (the fixture)
from tests.cli.conftest import assert_cli_error, json_out
from tests.rag.conftest import write_stdlib_docs

Cli = Any


def _spec(tmp_path: Path, chat: ChatServer, index: str) -> Path:
    spec = {
        "model": {"url": chat.url, "name": "smol"},
        "tools": [{"name": "rag_search", "options": {"index": index, "k": 2}}],
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def test_rag_search_reads_the_index_and_the_model_sees_its_passages(
    agent_cli: Cli,  # noqa: F811
    chat_server: ChatServer,
    tmp_path: Path,
) -> None:
    default_embedder()  # loaded once per test run, as the rag tests do
    docs = write_stdlib_docs(tmp_path / "docs", ("heapq", "bisect"))
    assert agent_cli("rag", "index", "std", docs, "--chunk-tokens", "96").code == 0
    chat_server.call("rag_search", {"query": "push an item onto the heap"})
    chat_server.say("heappush pushes an item onto the heap.")

    reply = json_out(
        agent_cli("agent", "run", _spec(tmp_path, chat_server, "std"), "heappush?", "--json")
    )

    assert (reply["stop_reason"], reply["steps"]) == ("answered", 2)
    tool_message = chat_server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    passages = json.loads(tool_message["content"])
    assert len(passages) == 2
    assert set(passages[0]) == {"id", "source", "section", "score", "text"}
    assert any("heappush" in p["section"] for p in passages)
    expected = json_out(
        agent_cli("rag", "query", "std", "push an item onto the heap", "--k", "2", "--json")
    )
    assert [p["id"] for p in passages] == [hit["chunk_id"] for hit in expected]


def test_an_unknown_index_is_one_sentence(
    agent_cli: Cli,  # noqa: F811
    chat_server: ChatServer,
    tmp_path: Path,
) -> None:
    result = agent_cli("agent", "run", _spec(tmp_path, chat_server, "nope"), "anything")
    assert_cli_error(result, "RAG index 'nope' does not exist")
    assert chat_server.requests == []
