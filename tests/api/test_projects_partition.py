"""Resources are partitioned by project: a create lands in the request's project
(`X-Forgeml-Project`), a list shows that project's only, and an item route is authorized in
the project its resource belongs to. Names stay unique across projects (409)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml.auth import add_member, issue_token
from forgeml.core.workspace import Workspace
from forgeml.tracking import RunStatus, finish_run, start_run
from tests.api._accounts_app import Caller, accounts_client, seed

OTHER_CSV = b"x,y\n4,b\n5,a\n6,b\n"


@pytest.fixture
def teams(workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    client, settings, _ = accounts_client(workspace, tmp_path)
    tokens = seed(
        workspace,
        settings,
        {
            "alice": ("owner", "default"),
            "tara": ("developer", "team-a"),
            "bob": ("developer", "team-b"),
            "pat": ("developer", "team-a"),
        },
    )
    add_member(workspace, "team-b", "pat", "developer", actor="tester")
    with client:
        yield {
            "workspace": workspace,
            "alice": Caller(client, tokens["alice"], None),
            "tara": Caller(client, tokens["tara"], "team-a"),
            "tara_no_header": Caller(client, tokens["tara"], None),
            "bob": Caller(client, tokens["bob"], "team-b"),
            "alice_in_a": Caller(client, tokens["alice"], "team-a"),
            "pat_in_b": Caller(client, tokens["pat"], "team-b"),
        }


def _run_in(workspace: Workspace, project: str, actor: str) -> str:
    """A finished run recorded the way training records one, in `project`."""
    home = workspace.in_project(project).acting_as(actor)
    handle = start_run(home, {"lr": 0.1}, "probe", None)
    finish_run(handle, RunStatus.FINISHED, {"accuracy": 0.5})
    return handle.run_id


def _names(items: object) -> list[str]:
    assert isinstance(items, list)
    return [item.get("dataset", item.get("name")) for item in items]


def test_a_teams_dataset_and_run_are_listed_in_its_project_only(teams: dict) -> None:
    assert teams["tara"].upload("iris-a") == 201
    assert teams["alice"].upload("iris-default") == 201
    run_a = _run_in(teams["workspace"], "team-a", "tara")
    run_default = _run_in(teams["workspace"], "default", "alice")

    assert _names(teams["tara"].get("/api/v1/datasets")[1]) == ["iris-a"]
    assert [run["run_id"] for run in teams["tara"].get("/api/v1/runs")[1]] == [run_a]
    # team-b's developer sees none of them
    assert teams["bob"].get("/api/v1/datasets") == (200, [])
    assert teams["bob"].get("/api/v1/runs") == (200, [])
    # the owner of default sees default's only
    assert _names(teams["alice"].get("/api/v1/datasets")[1]) == ["iris-default"]
    assert [run["run_id"] for run in teams["alice"].get("/api/v1/runs")[1]] == [run_default]


def test_an_item_is_authorized_in_the_project_it_belongs_to(teams: dict) -> None:
    assert teams["tara"].upload("iris-a") == 201
    run_a = _run_in(teams["workspace"], "team-a", "tara")

    for url in ("/api/v1/datasets/iris-a", "/api/v1/datasets/iris-a/versions",
                f"/api/v1/runs/{run_a}", f"/api/v1/runs/{run_a}/metrics"):  # fmt: skip
        # another project's member: refused, whichever project it names
        status, body = teams["bob"].get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)
        # the owner of default is no member of team-a
        assert teams["alice"].get(url)[0] == 403, url
        # team-a's member reads it without naming its project
        assert teams["tara_no_header"].get(url)[0] == 200, url
    assert teams["bob"].upload("iris-a", OTHER_CSV) == 403
    versions = teams["tara"].get("/api/v1/datasets/iris-a/versions")[1]
    assert [v["version"] for v in versions] == [1]  # type: ignore[index]


def test_an_unknown_item_is_authorized_in_the_request_project_then_404(teams: dict) -> None:
    assert teams["bob"].get("/api/v1/datasets/nosuch")[0] == 404
    assert teams["bob"].get("/api/v1/runs/nosuch")[0] == 404
    # a project the caller is no member of: refused before anything is looked up
    assert teams["alice_in_a"].get("/api/v1/datasets/nosuch")[0] == 403


def test_a_name_of_another_project_is_refused_with_409(teams: dict) -> None:
    assert teams["tara"].upload("shared") == 201

    answer = teams["pat_in_b"].client.post(
        "/api/v1/datasets/shared/versions",
        params={"filename": "data.csv"},
        content=OTHER_CSV,
        headers=teams["pat_in_b"].headers,
    )

    assert answer.status_code == 409
    assert "exists already, in the project 'team-a'" in answer.json()["error"]
    assert teams["pat_in_b"].get("/api/v1/datasets") == (200, [])


def test_a_malformed_project_header_is_a_400(teams: dict) -> None:
    caller = teams["tara"]
    status, body = caller.get("/api/v1/datasets")
    assert status == 200
    caller.headers["X-Forgeml-Project"] = "../team-a"

    status, body = caller.get("/api/v1/datasets")

    assert status == 400 and "project" in body["error"]
    # no credential: 401 first, whatever the header says
    anonymous = caller.client.get("/api/v1/datasets", headers={"X-Forgeml-Project": "../x"})
    assert anonymous.status_code == 401


def test_a_project_token_cannot_reach_another_project_by_its_header(
    teams: dict, workspace: Workspace
) -> None:
    teams["tara"].upload("iris-a")
    token = issue_token(workspace, "bob", "ci", actor="bob")[1]
    caller = Caller(teams["tara"].client, token, "team-a")

    assert caller.get("/api/v1/datasets")[0] == 403


def test_a_run_name_both_projects_use_finds_the_callers_own(teams: dict) -> None:
    run_b = _run_in(teams["workspace"], "team-b", "bob")
    run_a = _run_in(teams["workspace"], "team-a", "tara")  # the latest "probe" overall

    status, body = teams["bob"].get("/api/v1/runs/probe")

    assert (status, body["run_id"]) == (200, run_b)  # type: ignore[index]
    assert teams["tara"].get("/api/v1/runs/probe")[1]["run_id"] == run_a  # type: ignore[index]


def test_a_job_submitted_in_a_project_is_listed_and_cancelled_there_only(teams: dict) -> None:
    tara = teams["tara"]
    answer = tara.client.post(
        "/api/v1/jobs", json={"command": ["true"], "name": "probe"}, headers=tara.headers
    )
    assert answer.status_code == 201, answer.text
    job = answer.json()["job_id"]

    assert [j["job_id"] for j in tara.get("/api/v1/jobs")[1]] == [job]  # type: ignore[union-attr]
    assert teams["bob"].get("/api/v1/jobs") == (200, [])
    assert teams["bob"].get(f"/api/v1/jobs/{job}")[0] == 403
    bob = teams["bob"]
    cancel = bob.client.post(f"/api/v1/jobs/{job}/cancel", headers=bob.headers)
    assert cancel.status_code == 403
    assert tara.get(f"/api/v1/jobs/{job}")[1]["state"] == "PENDING"  # type: ignore[index]


def test_a_deployment_belongs_to_the_project_it_was_created_in(teams: dict) -> None:
    from forgeml.core.errors import AlreadyExistsError
    from forgeml.serve.deployments import DeploymentSpec, _records, apply_spec

    workspace: Workspace = teams["workspace"]
    spec = DeploymentSpec(model="adult-mlp@v2", model_ref="adult-mlp@v2", replicas=1)
    in_a = workspace.in_project("team-a").acting_as("tara")
    with workspace.store.session() as session:
        _records._add_record(session, in_a, "web", spec, "failed", _records.now())

    assert _names(teams["tara"].get("/api/v1/deployments")[1]) == ["web"]
    assert teams["bob"].get("/api/v1/deployments") == (200, [])
    assert teams["alice"].get("/api/v1/deployments") == (200, [])
    assert teams["bob"].get("/api/v1/deployments/web")[0] == 403
    assert teams["tara_no_header"].get("/api/v1/deployments/web")[0] == 200
    # its name is taken in every project: refused before any replica starts
    with pytest.raises(AlreadyExistsError, match="in the project 'team-a'"):
        apply_spec(workspace.in_project("team-b"), "web", spec)


def test_the_token_resource_and_membership_are_read_in_one_read_session(
    teams: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_a = _run_in(teams["workspace"], "team-a", "tara")
    store = teams["workspace"].store
    opened = []
    read_session = store.read_session

    def counted() -> object:
        opened.append(1)
        return read_session()

    monkeypatch.setattr(store, "read_session", counted)

    assert teams["tara_no_header"].get(f"/api/v1/runs/{run_a}")[0] == 200
    assert len(opened) == 1


def test_every_item_route_of_a_partitioned_resource_is_authorized_in_its_project(
    workspace: Workspace,
) -> None:
    from forgeml.api import create_app
    from forgeml.api._authz import api_routes, route_resource

    kinds = {"datasets": "dataset", "runs": "run", "models": "model", "jobs": "job",
             "deployments": "deployment", "prompts": "prompt",
             "rag/indexes": "rag_index", "pipelines/runs": "pipeline",
             "labels": "label", "alerts": "alert", "agents/runs": "agent_run"}  # fmt: skip
    items = {
        (route.path, kind): route_resource(route)
        for route in api_routes(create_app(workspace).routes)
        for plural, kind in kinds.items()
        if route.path.startswith(f"/api/v1/{plural}/{{")
    }

    assert len(items) >= 42  # every item route of the eleven kinds, from here on too
    assert {path: found for (path, kind), found in items.items() if found != kind} == {}


def _deployment_in_a(workspace: Workspace) -> None:
    from forgeml.serve.deployments import DeploymentSpec, _records

    spec = DeploymentSpec(model="adult-mlp@v2", model_ref="adult-mlp@v2", replicas=1)
    in_a = workspace.in_project("team-a").acting_as("tara")
    with workspace.store.session() as session:
        _records._add_record(session, in_a, "web", spec, "failed", _records.now())


def test_monitoring_reads_are_authorized_in_the_named_deployments_project(teams: dict) -> None:
    _deployment_in_a(teams["workspace"])

    for url in ("/api/v1/monitor/drift?deployment=web",
                "/api/v1/monitor/accuracy?deployment=web",
                "/api/v1/monitor/accuracy/windows?deployment=web"):  # fmt: skip
        status, body = teams["bob"].get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)  # type: ignore[index]
        assert teams["alice"].get(url)[0] == 403, url
        # team-a's member is authorized (its answer is the route's own: no log yet, ...)
        assert teams["tara_no_header"].get(url)[0] != 403, url
    # an unknown name: authorized in the request's project, then the route's own 404
    assert teams["bob"].get("/api/v1/monitor/drift?deployment=nosuch")[0] == 404
    assert teams["bob"].get("/api/v1/monitor/accuracy?deployment=nosuch")[0] == 404


def test_lineage_is_authorized_in_the_root_records_project(teams: dict) -> None:
    assert teams["tara"].upload("iris-a") == 201
    run_a = _run_in(teams["workspace"], "team-a", "tara")
    _deployment_in_a(teams["workspace"])

    for record in ("iris-a@v1", "dataset:iris-a@v1", run_a, f"run:{run_a}", "deployment:web"):
        url = f"/api/v1/lineage/{record}"
        status, body = teams["bob"].get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)  # type: ignore[index]
        assert teams["alice"].get(url)[0] == 403, url
        status, body = teams["tara_no_header"].get(url)
        assert status == 200 and body["nodes"], (url, body)  # type: ignore[index]
    assert teams["bob"].get("/api/v1/lineage/nosuch@v1")[0] == 404


def test_a_datasets_rows_are_read_in_its_project_only(teams: dict) -> None:
    import io

    import polars as pl

    assert teams["tara"].upload("iris-a") == 201
    url = "/api/v1/datasets/iris-a@v1/frame"

    answer = teams["tara"].client.get(url, headers=teams["tara"].headers)
    assert answer.status_code == 200, answer.text
    assert pl.read_ipc_stream(io.BytesIO(answer.content))["x"].to_list() == [1, 2, 3]
    # a member of team-a acting in another project (pat in team-b, tara in default) is
    # authorized, but reads no rows of team-a's there: `data head|export` act in one project
    for caller in ("pat_in_b", "tara_no_header"):
        status, body = teams[caller].get(url)
        assert (status, body["code"]) == (403, "other_project"), (caller, body)  # type: ignore[index]
        assert "Dataset 'iris-a' belongs to the project 'team-a'" in body["error"]  # type: ignore[index]
    assert teams["bob"].get(url)[0] == 403


def test_a_dataset_query_reads_the_request_projects_datasets_only(teams: dict) -> None:
    assert teams["tara"].upload("iris-a") == 201

    def query(caller: Caller, sql: str) -> tuple[int, dict]:
        answer = caller.client.post(
            "/api/v1/datasets/query", json={"sql": sql}, headers=caller.headers
        )
        return answer.status_code, answer.json()

    assert query(teams["tara"], 'SELECT count(*) AS n FROM "iris-a"') == (
        200, {"columns": ["n"], "rows": [{"n": 3}]}
    )  # fmt: skip
    for caller in ("bob", "pat_in_b", "alice"):
        for sql in ('SELECT * FROM "iris-a@v1"', "SELECT x FROM 'iris-a' WHERE x > 1"):
            status, body = query(teams[caller], sql)
            assert status == 403, (caller, sql, body)
            assert "'iris-a' belongs to the project 'team-a'" in body["error"], body


def test_monitoring_reads_of_a_model_are_authorized_in_the_models_project(teams: dict) -> None:
    from forgeml.core.ids import new_id
    from forgeml.core.store import ModelVersionRecord

    workspace: Workspace = teams["workspace"]
    run_a = _run_in(workspace, "team-a", "tara")
    with workspace.store.session() as session:
        session.add(
            ModelVersionRecord(
                id=new_id(),
                name="mlp-a",
                version=1,
                run_id=run_a,
                project="team-a",
                artifact_digest="0" * 64,
                metrics={},
                created_by="tara",
            )
        )

    for url in ("/api/v1/monitor/drift?model=mlp-a@v1", "/api/v1/monitor/accuracy?model=mlp-a",
                "/api/v1/monitor/accuracy/windows?model=mlp-a@v1"):  # fmt: skip
        status, body = teams["bob"].get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)  # type: ignore[index]
        assert teams["tara_no_header"].get(url)[0] != 403, url


def test_what_lives_install_wide_is_decided_in_default_whatever_project_a_header_names(
    teams: dict,
) -> None:
    # bob is a developer of team-b only: naming team-b does not make default's queue
    # settings or audit log his (install-wide records); the shared queues he reads in team-b
    # (tests/api/test_queues_projects.py)
    install_wide = ("/api/v1/audit",)  # fmt: skip
    for url in install_wide:
        status, body = teams["bob"].get(url)
        assert status == 403 and "'default'" in body["error"], (url, body)  # type: ignore[index]
        assert teams["alice_in_a"].get(url)[0] != 403, url  # default's owner, from anywhere
    # a partitioned resource is still decided in the named project: RAG indexes,
    # pipelines, labelling tasks, alerts and agent runs too
    assert teams["bob"].get("/api/v1/runs")[0] == 200
    assert teams["bob"].get("/api/v1/labels") == (200, [])
    assert teams["bob"].get("/api/v1/agents/runs/nosuch")[0] == 404
    assert teams["bob"].get("/api/v1/rag/indexes") == (200, [])
    assert teams["bob"].get("/api/v1/pipelines/runs") == (200, [])
    assert teams["bob"].get("/api/v1/alerts") == (200, {"alerts": []})
    # keys and cost reports too (tests/api/test_keys_cost_projects.py): a developer reads
    # team-b's cost, and keys are a maintainer's
    assert teams["bob"].get("/api/v1/cost/report")[0] == 200
    status, body = teams["bob"].get("/api/v1/keys")
    assert status == 403 and "keys:read in the project 'team-b'" in body["error"]  # type: ignore[index]


def test_a_teams_pipeline_runs_are_listed_and_read_in_its_project_only(
    teams: dict, tmp_path: Path
) -> None:
    from forgeml.pipelines import load_pipeline
    from forgeml.pipelines.runs import finish_run as finish_pipeline_run
    from forgeml.pipelines.runs import open_run

    workspace: Workspace = teams["workspace"]
    path = tmp_path / "hello.yaml"
    path.write_text("name: hello\nsteps:\n  - {name: a, kind: command, argv: [echo]}\n")
    in_a = workspace.in_project("team-a").acting_as("tara")
    run_id = open_run(in_a, load_pipeline(path))
    finish_pipeline_run(in_a, run_id, "SUCCEEDED", None)

    status, listed = teams["tara"].get("/api/v1/pipelines/runs")
    assert status == 200 and [r["id"] for r in listed] == [run_id]  # type: ignore[union-attr,index]
    assert teams["bob"].get("/api/v1/pipelines/runs") == (200, [])
    assert teams["alice"].get("/api/v1/pipelines/runs") == (200, [])
    for ref in (run_id, run_id[:8], "hello"):
        url = f"/api/v1/pipelines/runs/{ref}"
        status, body = teams["bob"].get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)  # type: ignore[index]
        status, body = teams["tara_no_header"].get(url)
        assert status == 200 and body["project"] == "team-a", (url, body)  # type: ignore[index]
    assert teams["bob"].get("/api/v1/pipelines/runs/nosuch")[0] == 404


def _alertmanager(*labels: dict[str, str]) -> dict:
    """Alertmanager's webhook message (version 4) firing one alert per label set."""
    alerts = [
        {"status": "firing", "labels": {"alertname": "Backlog", **these}, "annotations": {},
         "startsAt": "2026-12-03T10:00:00Z", "fingerprint": f"f{index}"}
        for index, these in enumerate(labels)
    ]  # fmt: skip
    return {"version": "4", "status": "firing", "receiver": "r", "alerts": alerts}


def _alert_labels(caller: Caller) -> list[dict[str, str]]:
    status, body = caller.get("/api/v1/alerts")
    assert status == 200, body
    return [alert["labels"] for alert in body["alerts"]]  # type: ignore[index]


def test_a_teams_alerts_are_listed_read_and_acknowledged_in_its_project_only(
    teams: dict,
) -> None:
    tara, bob, alice = teams["tara"], teams["bob"], teams["alice"]
    _deployment_in_a(teams["workspace"])
    # the webhook serves the whole install: default's owner posts it, whatever the header
    message = _alertmanager({"deployment": "web"}, {"model": "lonely"})
    assert _post(teams["alice_in_a"], "/api/v1/alertmanager", message)[0] == 200

    # tara, a developer of team-a only, sees and acknowledges team-a's alerts
    assert [labels.get("deployment") for labels in _alert_labels(tara)] == ["web"]
    assert bob.get("/api/v1/alerts") == (200, {"alerts": []})
    assert [labels.get("model") for labels in _alert_labels(alice)] == ["lonely"]
    alert_id = tara.get("/api/v1/alerts")[1]["alerts"][0]["id"]  # type: ignore[index]
    for url in (f"/api/v1/alerts/{alert_id}", f"/api/v1/alerts/{alert_id[:8]}"):
        status, body = bob.get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)  # type: ignore[index]
        assert alice.get(url)[0] == 403, url
        status, body = teams["tara_no_header"].get(url)
        assert status == 200 and body["project"] == "team-a", (url, body)  # type: ignore[index]
    assert bob.get("/api/v1/alerts/nosuch")[0] == 404
    ack = f"/api/v1/alerts/{alert_id[:8]}/ack"
    assert _post(bob, ack, None)[0] == 403
    # a member of both acting in team-b acknowledges nothing of team-a's
    status, body = _post(teams["pat_in_b"], ack, None)
    assert status == 403 and "belongs to the project 'team-a'" in body["error"], body
    assert tara.get(f"/api/v1/alerts/{alert_id}")[1]["acked_by"] is None  # type: ignore[index]
    status, body = _post(tara, ack, None)
    assert (status, body["acked_by"]) == (200, "tara"), body


def test_the_alertmanager_webhook_is_decided_in_default_whatever_the_header(
    teams: dict, tmp_path: Path
) -> None:
    from tests.auth._accounts import fast_settings, person

    workspace: Workspace = teams["workspace"]
    person(workspace, fast_settings(tmp_path), "mona", "maintainer", "team-b")
    mona = Caller(teams["bob"].client, issue_token(workspace, "mona", "am", actor="t")[1], "team-b")

    status, body = _post(mona, "/api/v1/alertmanager", _alertmanager({"model": "x"}))

    assert status == 403 and "may not alerts:receive in the project 'default'" in body["error"]
    assert _alert_labels(teams["alice"]) == []


PROMPT = {"template": "Q: {{ question }}", "variables": [{"name": "question"}]}


def _post(caller: Caller, url: str, body: object) -> tuple[int, dict]:
    answer = caller.client.post(url, json=body, headers=caller.headers)
    return answer.status_code, answer.json()


def test_a_teams_prompt_is_listed_read_and_changed_in_its_project_only(teams: dict) -> None:
    tara, bob = teams["tara"], teams["bob"]
    assert _post(tara, "/api/v1/prompts/qa-a/versions", PROMPT)[0] == 200
    assert _post(teams["alice"], "/api/v1/prompts/qa-default/versions", PROMPT)[0] == 200

    assert _names(tara.get("/api/v1/prompts")[1]) == ["qa-a"]
    assert tara.get("/api/v1/prompts/qa-a")[1]["project"] == "team-a"  # type: ignore[index]
    assert bob.get("/api/v1/prompts") == (200, [])
    assert _names(teams["alice"].get("/api/v1/prompts")[1]) == ["qa-default"]
    for url in ("/api/v1/prompts/qa-a", "/api/v1/prompts/qa-a/versions"):
        status, body = bob.get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)  # type: ignore[index]
        assert teams["alice"].get(url)[0] == 403, url
        assert teams["tara_no_header"].get(url)[0] == 200, url
    changes = {"/api/v1/prompts/qa-a/alias": {"alias": "prod"},
               "/api/v1/prompts/qa-a@v1/render": {"variables": {"question": "?"}},
               "/api/v1/prompts/qa-a/versions": {**PROMPT, "description": "b"}}  # fmt: skip
    for url, body in changes.items():
        assert _post(bob, url, body)[0] == 403, url
    assert _post(tara, "/api/v1/prompts/qa-a/alias", {"alias": "prod"})[0] == 200
    # a member of both acting in team-b changes nothing of team-a's
    status, body = _post(teams["pat_in_b"], "/api/v1/prompts/qa-a/alias", {"alias": "x"})
    assert status == 403 and "belongs to the project 'team-a'" in body["error"]
    assert tara.get("/api/v1/prompts/qa-a")[1]["aliases"] == ["prod"]  # type: ignore[index]


def test_a_prompt_name_of_another_project_is_refused_with_409(teams: dict) -> None:
    assert _post(teams["tara"], "/api/v1/prompts/shared/versions", PROMPT)[0] == 200

    status, body = _post(teams["pat_in_b"], "/api/v1/prompts/shared/versions", PROMPT)

    assert status == 409 and "exists already, in the project 'team-a'" in body["error"]
    assert teams["pat_in_b"].get("/api/v1/prompts") == (200, [])


def test_a_prompt_is_used_by_what_acts_in_its_project_only(teams: dict) -> None:
    from forgeml.core.errors import OtherProjectError
    from forgeml.prompts import PromptSpec, create_prompt, get_prompt

    workspace: Workspace = teams["workspace"]
    create_prompt(workspace.in_project("team-a"), "qa-a", PromptSpec.model_validate(PROMPT))

    assert get_prompt(workspace.in_project("team-a"), "qa-a").ref == "qa-a@v1"
    for project in ("team-b", "default"):
        with pytest.raises(OtherProjectError, match="'qa-a' belongs to the project 'team-a'"):
            get_prompt(workspace.in_project(project), "qa-a")


def _index_in(workspace: Workspace, project: str, name: str, folder: Path) -> None:
    """A one-document RAG index `name`, built in `project` as tara."""
    from forgeml.rag.versions import build_version

    folder.mkdir(exist_ok=True)
    (folder / f"{name}.md").write_text("# Lists\n\nbisect inserts into a sorted list.\n")
    build_version(workspace.in_project(project).acting_as("tara"), name, [str(folder)])


@pytest.mark.slow
def test_a_teams_rag_index_is_listed_read_and_queried_in_its_project_only(
    teams: dict, tmp_path: Path
) -> None:
    tara, bob = teams["tara"], teams["bob"]
    _index_in(teams["workspace"], "team-a", "docs-a", tmp_path / "a")
    _index_in(teams["workspace"], "default", "docs-default", tmp_path / "default")

    assert _names(tara.get("/api/v1/rag/indexes")[1]) == ["docs-a"]
    assert tara.get("/api/v1/rag/indexes/docs-a")[1]["project"] == "team-a"  # type: ignore[index]
    assert bob.get("/api/v1/rag/indexes") == (200, [])
    assert _names(teams["alice"].get("/api/v1/rag/indexes")[1]) == ["docs-default"]
    for url in ("/api/v1/rag/indexes/docs-a@v1", "/api/v1/rag/indexes/docs-a/versions"):
        status, body = bob.get(url)
        assert status == 403 and "'team-a'" in body["error"], (url, body)  # type: ignore[index]
        assert teams["alice"].get(url)[0] == 403, url
        assert teams["tara_no_header"].get(url)[0] == 200, url
    query = {"text": "a sorted list", "k": 1}
    assert _post(bob, "/api/v1/rag/indexes/docs-a/query", query)[0] == 403
    status, hits = _post(teams["tara_no_header"], "/api/v1/rag/indexes/docs-a/query", query)
    assert status == 200 and "sorted list" in hits[0]["text"], hits  # type: ignore[index]


def test_a_rag_index_name_of_another_project_is_refused_before_reading_its_sources(
    teams: dict, tmp_path: Path
) -> None:
    from forgeml.core.errors import AlreadyExistsError
    from forgeml.core.store import RagIndexRecord
    from forgeml.rag.versions import build_version

    workspace: Workspace = teams["workspace"]
    with workspace.store.session() as session:
        session.add(RagIndexRecord(id="i1", name="docs", project="team-a", created_by="tara"))

    for project in ("team-b", "default"):
        with pytest.raises(AlreadyExistsError, match="exists already, in the project 'team-a'"):
            build_version(workspace.in_project(project), "docs", [str(tmp_path / "nosuch")])
    assert teams["bob"].get("/api/v1/rag/indexes") == (200, [])


@pytest.mark.slow
def test_a_rag_index_is_used_by_what_acts_in_its_project_only(teams: dict, tmp_path: Path) -> None:
    from forgeml.core.errors import OtherProjectError
    from forgeml.rag.passages import index_search
    from forgeml.rag.serving import close_served, open_served
    from forgeml.rag.versions import open_index, rebuild

    workspace: Workspace = teams["workspace"]
    _index_in(workspace, "team-a", "docs-a", tmp_path)
    in_a = workspace.in_project("team-a")

    assert "sorted list" in index_search(in_a, "docs-a")("a sorted list", 1)[0]["text"]
    assert rebuild(in_a, "docs-a@v1")[0].ref == "docs-a@v1"
    close_served(open_served(in_a, ["docs-a"]))
    uses = {"open_index": lambda home: open_index(home, "docs-a").close(),
            "rag_search": lambda home: index_search(home, "docs-a"),
            "rebuild": lambda home: rebuild(home, "docs-a@v1"),
            "serve --rag": lambda home: open_served(home, ["docs-a@v1"])}  # fmt: skip
    for project in ("team-b", "default"):
        for use, call in uses.items():
            with pytest.raises(OtherProjectError, match="'docs-a' belongs to the project 'team-a'"):
                call(workspace.in_project(project))
                pytest.fail(use)


def test_a_traffic_change_refuses_a_deployment_serving_another_projects_model(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.serve import _supervisor
    from forgeml.serve.deployments import CanarySpec, DeploymentSpec, _records, get_deployment
    from tests.serve.test_deployment_projects import register

    def start_all(*_: object) -> None:
        pytest.fail("a replica was started")

    monkeypatch.setattr(_supervisor, "start_all", start_all)
    client, settings, _ = accounts_client(workspace, tmp_path)
    tokens = seed(workspace, settings, {"mia": ("maintainer", "team-b")})
    register(workspace, "mlp-a", "team-a")
    register(workspace, "mlp-b", "team-b")
    # recorded before deployments were held to their project's models
    canary = CanarySpec(model="mlp-a@v1", weight=10)
    spec = DeploymentSpec(model="mlp-b@v1", model_ref="mlp-b@v1", canary=canary)
    in_b = workspace.in_project("team-b").acting_as("mia")
    with workspace.store.session() as session:
        _records._add_record(session, in_b, "web-b", spec, "ready", _records.now())
    mia = Caller(client, tokens["mia"], "team-b")
    before = get_deployment(workspace, "web-b")

    with client:
        answer = client.post(
            "/api/v1/deployments/web-b/traffic", json={"canary_weight": 50}, headers=mia.headers
        )

    assert (answer.status_code, answer.json()["code"]) == (403, "other_project"), answer.text
    assert "Model 'mlp-a' belongs to the project 'team-a'" in answer.json()["error"]
    assert get_deployment(workspace, "web-b") == before  # no revision recorded
