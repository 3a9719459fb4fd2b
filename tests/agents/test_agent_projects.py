"""Agent runs belong to the project they start in: read and approved there only, and their
tools reach that project's datasets, RAG indexes and deployments only (the API, with
accounts; the CLI's side is tests/agents/test_cli.py and tests/cli/test_remote_agent.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from forgeml.agents import RunState, load_state
from forgeml.agents.state import state_path
from forgeml.auth import add_member
from forgeml.core.workspace import Workspace
from forgeml.rag.versions import build_version
from tests._wait import wait_until
from tests.agents.conftest import ChatServer
from tests.api._accounts_app import Caller, accounts_client, seed
from tests.data.conftest import add, audit_events, write_table_csv

RUNS = "/api/v1/agents/runs"
HELD = {"name": "calculator", "requires_approval": True}


@pytest.fixture
def teams(
    workspace: Workspace, tmp_path: Path, mlflow_template: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = workspace.settings.home
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(mlflow_template, home / "mlflow.db")
    client, settings, _ = accounts_client(workspace, tmp_path)
    tokens = seed(
        workspace,
        settings,
        {
            "alice": ("owner", "default"),
            "tara": ("developer", "team-a"),
            "mia": ("maintainer", "team-a"),
            "bob": ("maintainer", "team-b"),
            "pat": ("maintainer", "team-a"),
        },
    )
    add_member(workspace, "team-b", "pat", "maintainer", actor="tester")
    with client:
        yield {
            "workspace": workspace,
            "alice": Caller(client, tokens["alice"], None),
            "alice_in_a": Caller(client, tokens["alice"], "team-a"),
            "tara": Caller(client, tokens["tara"], "team-a"),
            "tara_no_header": Caller(client, tokens["tara"], None),
            "mia": Caller(client, tokens["mia"], "team-a"),
            "bob": Caller(client, tokens["bob"], "team-b"),
            "pat_in_b": Caller(client, tokens["pat"], "team-b"),
        }


def spec(chat: ChatServer, *tools: dict[str, Any]) -> dict[str, Any]:
    return {"model": {"url": chat.url, "name": "smol"}, "tools": list(tools)}


def stopped(caller: Caller, run_id: str) -> dict[str, Any]:
    shown: dict[str, Any] = {}

    def done() -> bool:
        status, body = caller.get(f"{RUNS}/{run_id}")
        assert status == 200, body
        shown.update(body)
        return shown["stop_reason"] is not None

    wait_until(done, timeout=120, what=f"agent run {run_id} stopping")
    return shown


def held_run(teams: dict[str, Any], chat: ChatServer) -> str:
    """A run tara starts in team-a, waiting on the calculator call c1."""
    chat.call("calculator", {"expression": "2 ** 10"})
    status, body = teams["tara"].post(RUNS, {"spec": spec(chat, HELD), "task": "2 ** 10?"})
    assert status == 202, body
    assert body["project"] == "team-a"
    assert stopped(teams["tara"], body["run_id"])["stop_reason"] == "awaiting_approval"
    return str(body["run_id"])


def test_a_run_belongs_to_the_project_it_started_in_and_is_read_there_only(
    teams: dict[str, Any], chat_server: ChatServer
) -> None:
    run_id = held_run(teams, chat_server)

    status, body = teams["tara_no_header"].get(f"{RUNS}/{run_id}")
    assert (status, body["project"]) == (200, "team-a")
    assert load_state(teams["workspace"].settings.home, run_id).project == "team-a"
    for caller in ("bob", "alice", "pat_in_b"):
        status, body = teams[caller].get(f"{RUNS}/{run_id}")
        if caller == "pat_in_b":  # a member of team-a too: an item is read by its id
            assert status == 200, body
            continue
        assert status == 403 and "'team-a'" in body["error"], (caller, body)
    # default's owner is no member of team-a: it cannot start a run there
    assert teams["alice_in_a"].post(RUNS, {"spec": spec(chat_server), "task": "t"})[0] == 403
    # an unknown run: authorized in the request's project, then 404
    assert teams["bob"].get(f"{RUNS}/nosuch")[0] == 404


def test_a_run_is_approved_in_its_own_project_only(
    teams: dict[str, Any], chat_server: ChatServer
) -> None:
    run_id = held_run(teams, chat_server)
    approve = f"{RUNS}/{run_id}/approve"

    status, body = teams["bob"].post(approve, {"approve": ["c1"]})
    assert status == 403 and "'team-a'" in body["error"], body
    # a maintainer of both, acting in team-b, resumes nothing of team-a's
    status, body = teams["pat_in_b"].post(approve, {"approve": ["c1"]})
    assert status == 403 and body["code"] == "other_project", body
    assert "Agent run" in body["error"] and "belongs to the project 'team-a'" in body["error"]
    assert stopped(teams["tara"], run_id)["stop_reason"] == "awaiting_approval"
    assert [e for e in audit_events(teams["workspace"]) if e.action == "agent.approve"] == []

    chat_server.say("1024")
    status, body = teams["mia"].post(approve, {"approve": ["c1"]})

    assert status == 202, body
    assert stopped(teams["tara"], run_id)["answer"] == "1024"
    (event,) = [e for e in audit_events(teams["workspace"]) if e.action == "agent.approve"]
    assert event.actor == "mia"


@pytest.fixture
def team_a_things(teams: dict[str, Any], tmp_path: Path) -> None:
    """team-a's dataset `people-a`, RAG index `kb-a` and deployment `web`."""
    from forgeml.serve.deployments import DeploymentSpec, _records

    in_a = teams["workspace"].in_project("team-a").acting_as("tara")
    add(in_a, "people-a", write_table_csv(tmp_path / "people.csv", rows=30))
    docs = tmp_path / "kb"
    docs.mkdir()
    (docs / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days.\n")
    build_version(in_a, "kb-a", [str(docs)])
    deployment = DeploymentSpec(model="adult-mlp@v2", model_ref="adult-mlp@v2", replicas=1)
    with in_a.store.session() as session:
        _records._add_record(session, in_a, "web", deployment, "failed", _records.now())


RAG = {"name": "rag_search", "options": {"index": "kb-a", "k": 1}}
PREDICT = {"name": "predict", "options": {"url": "http://127.0.0.1:9", "model": "web"}}
SQL = {"name": "sql_query"}


@pytest.mark.parametrize(("tool", "kind", "name"), [(RAG, "RAG index", "kb-a"),
                                                    (PREDICT, "Deployment", "web")])  # fmt: skip
def test_a_run_cannot_start_with_a_tool_on_another_projects_index_or_deployment(
    teams: dict[str, Any],
    chat_server: ChatServer,
    team_a_things: None,
    tool: dict[str, Any],
    kind: str,
    name: str,
) -> None:
    status, body = teams["bob"].post(RUNS, {"spec": spec(chat_server, tool), "task": "t"})

    assert status == 403 and body["code"] == "other_project", body
    assert body["error"].startswith(f"{kind} '{name}' belongs to the project 'team-a'")
    assert chat_server.requests == []
    runs = teams["workspace"].settings.home / "agents" / "runs"
    assert list(runs.glob("*.json")) == []  # nothing saved


def test_a_runs_tools_read_its_own_projects_datasets_and_indexes(
    teams: dict[str, Any], chat_server: ChatServer, team_a_things: None
) -> None:
    query = {"sql": 'SELECT count(*) AS n FROM "people-a"'}
    chat_server.call("sql_query", query)
    chat_server.call("rag_search", {"query": "refunds"}, call_id="c2")
    chat_server.say("30 people; 14 days.")

    status, body = teams["tara"].post(RUNS, {"spec": spec(chat_server, SQL, RAG), "task": "?"})

    assert status == 202, body
    done = stopped(teams["tara"], body["run_id"])
    assert done["answer"] == "30 people; 14 days."
    assert json.loads(done["messages"][3]["content"])["rows"] == [{"n": 30}]
    assert "14 days" in done["messages"][5]["content"]
    # team-b's run asks for the same table: its tool refuses it, and the model is told
    chat_server.call("sql_query", query)
    chat_server.say("I cannot read it.")
    status, body = teams["bob"].post(RUNS, {"spec": spec(chat_server, SQL), "task": "?"})
    assert status == 202, body
    refused = stopped(teams["bob"], body["run_id"])["messages"][3]["content"]
    assert refused.startswith("error: ") and "belongs to the project 'team-a'" in refused


def test_a_run_saved_before_runs_had_projects_belongs_to_default(
    teams: dict[str, Any],
) -> None:
    home = teams["workspace"].settings.home
    old = RunState(run_id="old-run", spec={}, messages=[]).to_json()
    del old["project"]
    path = state_path(home, "old-run")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(old))

    assert load_state(home, "old-run").project == "default"
    status, body = teams["alice"].get(f"{RUNS}/old-run")
    assert (status, body["project"]) == (200, "default")
    status, body = teams["bob"].get(f"{RUNS}/old-run")
    assert status == 403 and "'default'" in body["error"], body
