"""`forgeml serve MODEL --rag INDEX`: RAG's routes on the model server, from the command line."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.rag.embeddings import MiniLMEmbedder
from forgeml.rag.options import IndexOptions
from forgeml.rag.versions import build_version
from forgeml.serve._supervisor import free_port
from tests.cli.conftest import assert_cli_error
from tests.conftest import SmolLM2Home
from tests.gateway.conftest import TEST_OPTIONS, start_gateway
from tests.rag.conftest import write_stdlib_docs
from tests.serve.conftest import wait_ready
from tests.train.conftest import forgeml_command, subprocess_env


@pytest.mark.parametrize(
    ("args", "code", "sentence"),
    [
        (["--rag", "nosuch"], 1, "RAG index 'nosuch' does not exist"),
        (["--rag", "std@v9"], 1, "RAG index 'std' has no version v9"),
        (["--rag", "std", "--rag", "std@v1"], 2, "Index 'std' is given twice"),
        (["--rag-generator-model", "m"], 2, "--rag-generator and its options need --rag INDEX."),
        (["--rag", "std", "--rag-generator-model", "m"], 2, "need --rag-generator URL"),
        (
            ["--rag", "std", "--rag-generator", "http://x/v1", "--rag-generator-key-env", "NOPE_K"],
            1,
            "NOPE_K",
        ),
    ],
)
def test_serve_refuses_a_bad_rag_option_before_the_port_opens(
    cli: Any,
    embedder: MiniLMEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
    code: int,
    sentence: str,
) -> None:
    docs = write_stdlib_docs(tmp_path / "docs", ("heapq",))
    assert cli("rag", "index", "std", docs, "--chunk-tokens", "96").code == 0
    monkeypatch.delenv("NOPE_K", raising=False)
    port = free_port()

    result = cli("serve", "smollm2", "--port", str(port), *args)

    assert_cli_error(result, sentence, code)
    with socket.socket() as probe:  # nothing was left listening, or bound
        probe.bind(("127.0.0.1", port))


@pytest.mark.parametrize(
    ("args", "code", "sentence"),
    [
        (["--rag", "nosuch"], 1, "RAG index 'nosuch' does not exist"),
        (["--rag", "std", "--rag", "std@v1"], 2, "Index 'std' is given twice"),
    ],
)
def test_deploy_refuses_a_bad_rag_index_before_starting_replicas(
    cli: Any, embedder: MiniLMEmbedder, tmp_path: Path, args: list[str], code: int, sentence: str
) -> None:
    docs = write_stdlib_docs(tmp_path / "docs", ("heapq",))
    assert cli("rag", "index", "std", docs, "--chunk-tokens", "96").code == 0

    result = cli("deploy", "smollm2", "--name", "smol", *args)

    assert_cli_error(result, sentence, code)
    assert "Model 'smollm2'" not in result.stderr  # refused before the model is looked up


def _linked_home(template: Path, home: Path) -> Path:
    """A private copy of a workspace: its databases copied, its (immutable) artifacts linked."""

    def place(source: str, target: str) -> None:
        if ".db" in Path(source).name:
            shutil.copy2(source, target)
        else:
            os.link(source, target)

    shutil.copytree(template, home, copy_function=place)
    return home


@pytest.mark.slow
def test_served_smollm2_answers_rag_over_loopback_and_behind_the_gateway(
    smollm2_home: SmolLM2Home, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    home = _linked_home(smollm2_home.home, tmp_path / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    docs = write_stdlib_docs(tmp_path / "docs", ("heapq", "bisect"))
    build_version(workspace, "std", [str(docs)], IndexOptions(chunk_tokens=96), embedder)
    port = free_port()
    command = forgeml_command("serve", "smollm2", "--rag", "std", "--port", str(port))
    process = subprocess.Popen(
        command, env=subprocess_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, 300, process)
        question = {"question": "What does heapq.heappush do?", "k": 3, "max_tokens": 96}
        # no `model`, no --rag-generator: the server asks its one model over loopback
        direct = httpx.post(f"{url}/v1/rag/std/answer", json=question, timeout=300)
        assert direct.status_code == 200, direct.text
        answer = direct.json()
        assert answer["model"] == "smollm2" and answer["ref"] == "std@v1"
        assert answer["supported"] or (answer["citations"] == [] and answer["refused_reason"])

        options = TEST_OPTIONS.model_copy(update={"request_timeout_s": 300.0})
        started = start_gateway(workspace, options)
        gw = next(started)
        try:
            gw.deploy("smollm2", [url])
            allowed, elsewhere = gw.key(["smollm2"]), gw.key(["other"])
            query = {"model": "smollm2", "query": "push an item onto the heap", "k": 2}
            assert gw.post("/v1/rag/std/query", None, json=query).status_code == 401
            assert gw.post("/v1/rag/std/query", elsewhere, json=query).status_code == 403
            hits = gw.post("/v1/rag/std/query", allowed, json=query)
            assert hits.status_code == 200 and len(hits.json()["hits"]) == 2
            asked = gw.post(
                "/v1/rag/std/answer", allowed, json={**question, "model": "smollm2"}, timeout=300
            )
            assert asked.status_code == 200 and asked.json()["model"] == "smollm2"
            missing = gw.post("/v1/rag/nosuch/query", allowed, json=query)
            assert missing.status_code == 404 and "nosuch" in missing.json()["error"]
        finally:
            started.close()
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
        workspace.close()
    log = output.decode()
    assert process.returncode == 0, log
    assert "RAG indexes std@v1 on /v1/rag/NAME/query|answer" in log
