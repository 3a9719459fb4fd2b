"""Prompt, RAG index, pipeline, cost and deployment routes over real records, compared
with the CLI's `--json` for the same command where one exists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.pipelines import load_pipeline, run_pipeline
from forgeml.prompts import create_prompt
from tests.api.conftest import api_client
from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.pipelines.conftest import HELLO_PIPELINE
from tests.prompts.conftest import chat_spec, text_spec


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"  # the `cli` fixture's FORGEML_HOME


@pytest.fixture
def workspace(home: Path) -> Iterator[Workspace]:
    workspace = Workspace(
        Settings(home=home, user="tester", scheduler_cpus=2, scheduler_gpus=0,
                 scheduler_memory_gb=4)
    )  # fmt: skip
    try:
        yield workspace
    finally:
        workspace.close()


@pytest.fixture
def api(workspace: Workspace) -> Iterator[TestClient]:
    with api_client(workspace) as client:
        yield client


def test_prompts_list_show_versions_and_alias(
    api: TestClient, workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    create_prompt(workspace, "qa", text_spec())
    create_prompt(workspace, "qa", text_spec("Question: {{ question }}\nAnswer:"))
    create_prompt(workspace, "chat", chat_spec())
    moved = api.post("/api/v1/prompts/qa@v1/alias", json={"alias": "production"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["aliases"] == ["production"]
    first = api.get("/api/v1/prompts", params={"limit": 1})
    rest = api.get("/api/v1/prompts", params={"after": first.headers["X-Next-Cursor"]})
    assert [p["ref"] for p in first.json() + rest.json()] == ["chat@v1", "qa@v2"]
    for command, url in [
        (("prompts", "list"), "/api/v1/prompts"),
        (("prompts", "versions", "qa"), "/api/v1/prompts/qa/versions"),
        (("prompts", "show", "qa@production"), "/api/v1/prompts/qa@production"),
    ]:
        assert api.get(url).json() == json_out(cli(*command, "--json")), command
    newest = api.get("/api/v1/prompts/qa/versions", params={"order": "desc"}).json()
    assert [p["version"] for p in newest] == [2, 1]
    assert api.get("/api/v1/prompts/nope").status_code == 404
    bad = api.post("/api/v1/prompts/qa@v1/alias", json={"alias": "latest"})
    assert bad.status_code == 400 and bad.json()["error"]
    assert api.post("/api/v1/prompts/qa@v1/alias", json={"name": "x"}).status_code == 422


def test_pipeline_runs_and_the_cost_of_their_jobs(
    api: TestClient, workspace: Workspace, tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    path = tmp_path / "hello.yaml"
    path.write_text(HELLO_PIPELINE, encoding="utf-8")
    for _ in range(2):  # the second run is served from the step cache
        run_pipeline(workspace, load_pipeline(path, []), output=lambda _: None)
    first = api.get("/api/v1/pipelines/runs", params={"limit": 1})
    rest = api.get("/api/v1/pipelines/runs", params={"after": first.headers["X-Next-Cursor"]})
    listed = first.json() + rest.json()
    assert [r["name"] for r in listed] == ["hello", "hello"]
    assert listed == json_out(cli("pipelines", "list", "--json"))
    shown = api.get(f"/api/v1/pipelines/runs/{listed[-1]['id'][:8]}").json()
    assert shown == json_out(cli("pipelines", "show", listed[-1]["id"], "--json"))
    assert [step["name"] for step in shown["steps"]] == ["write"]
    assert api.get("/api/v1/pipelines/runs", params={"name": "other"}).json() == []
    assert api.get("/api/v1/pipelines/runs/nope").status_code == 404
    report = api.get("/api/v1/cost/report", params={"by": "queue"}).json()
    assert report == json_out(cli("cost", "report", "--by", "queue", "--json"))
    assert report["total"]["attempts"] == 1  # one job ran; the cached step ran none
    assert api.get("/api/v1/cost/budgets").json() == json_out(cli("cost", "budgets", "--json"))
    assert api.get("/api/v1/cost/report", params={"by": "color"}).status_code == 422
    since = api.get("/api/v1/cost/report", params={"since": "yesterday-ish"})
    assert since.status_code == 400 and since.json()["error"]


def test_rag_index_versions_and_lineage(
    api: TestClient, workspace: Workspace, tmp_path: Path
) -> None:
    from forgeml.rag.options import IndexOptions
    from forgeml.rag.versions import build_version
    from tests.rag.conftest import write_stdlib_docs

    docs = write_stdlib_docs(tmp_path / "docs", ("bisect",))
    build_version(workspace, "std", [str(docs)], IndexOptions(chunk_tokens=96))
    (listed,) = api.get("/api/v1/rag/indexes/std/versions").json()
    assert listed["ref"] == "std@v1" and listed["documents"] == 1
    assert api.get("/api/v1/rag/indexes/std@v1").json() == listed
    assert api.get("/api/v1/rag/indexes").json() == [{"name": "std", **listed}]
    by_age = api.get("/api/v1/rag/indexes", params={"sort": "created_at", "order": "desc"})
    assert [item["ref"] for item in by_age.json()] == ["std@v1"]
    build_version(workspace, "std", [str(docs)], IndexOptions(chunk_tokens=64))
    assert [item["ref"] for item in api.get("/api/v1/rag/indexes").json()] == ["std@v2"]
    bad_sort = api.get("/api/v1/rag/indexes", params={"sort": "color"})
    assert bad_sort.status_code == 422 and "sort" in bad_sort.json()["error"]
    missing = api.get("/api/v1/rag/indexes/nope/versions")
    assert missing.status_code == 404 and missing.json()["error"]


def test_deployments_list_empty_and_unknown_is_404(
    api: TestClient, cli: Callable[..., CliResult]
) -> None:
    assert api.get("/api/v1/deployments").json() == json_out(cli("deploy", "list", "--json"))
    missing = api.get("/api/v1/deployments/nope")
    assert missing.status_code == 404 and missing.json()["error"]
