"""The project switch in the nav: the pages list the chosen project's resources, a project
the caller is not a member of is refused, a malformed cookie is ignored, and the API's
answers never follow the cookie."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import expect

from forgeml.auth import add_member, create_project
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.gateway import create_key
from forgeml.tracking import RunStatus, finish_run, start_run
from forgeml.ui import create_app
from tests.auth._accounts import person
from tests.ui._seed import PASSWORD
from tests.ui.conftest import Browser, Served, signed_in

TEAM_RUN = "team-a-probe"
DEFAULT_RUN = "adult-mlp"  # the seeded workspace's trained runs, in `default`


@pytest.fixture(scope="module")
def teams(served: Served) -> str:
    """`tom`: viewer of `default`, developer of `team-a` (which holds one run); `tara`:
    developer of `team-a` only; `team-b` exists without either."""
    workspace = served.workspace
    person(workspace, served.settings, "tom", "viewer")
    person(workspace, served.settings, "tara", "developer", "team-a")
    add_member(workspace, "team-a", "tom", "developer", actor="tester")
    create_project(workspace, "team-b", actor="tester")
    handle = start_run(workspace.in_project("team-a").acting_as("tom"), {"lr": 0.1}, TEAM_RUN, None)
    finish_run(handle, RunStatus.FINISHED, {"accuracy": 0.5})
    return "tom"


@pytest.fixture
def tom(served: Served, teams: str) -> Iterator[httpx.Client]:
    client = signed_in(served.url, teams)
    yield client
    client.close()


def _switch(client: httpx.Client, project: str) -> httpx.Response:
    fields = {"project": project, "csrf_token": client.cookies["forgeml_csrf"], "next": "/runs"}
    return client.post("/project", data=fields, follow_redirects=False)


def _run_names(answer: httpx.Response) -> set[str]:
    return {run["name"] for run in answer.json()}


def test_a_member_switching_to_team_a_sees_its_runs_and_not_defaults(tom: httpx.Client) -> None:
    before = tom.get("/runs").text
    assert DEFAULT_RUN in before and TEAM_RUN not in before
    assert 'id="project-switch"' in before
    assert '<option value="default" selected>' in before
    assert '<option value="team-a">' in before and "team-b" not in before

    switched = _switch(tom, "team-a")
    assert switched.status_code == 303 and switched.headers["location"] == "/runs"
    cookie = switched.headers["set-cookie"]
    assert cookie.startswith("forgeml_project=team-a;") and "SameSite=strict" in cookie
    after = tom.get("/runs").text
    assert TEAM_RUN in after and DEFAULT_RUN not in after
    assert '<option value="team-a" selected>' in after
    # the API's answers never follow the page's cookie: only the header names a project
    assert DEFAULT_RUN in _run_names(tom.get("/api/v1/runs"))
    in_a = tom.get("/api/v1/runs", headers={"X-Forgeml-Project": "team-a"})
    assert _run_names(in_a) == {TEAM_RUN}

    assert _switch(tom, "default").status_code == 303
    assert TEAM_RUN not in tom.get("/runs").text


def test_a_dataset_of_another_project_shows_its_metadata_and_says_where_its_rows_are(
    tom: httpx.Client,
) -> None:
    assert _switch(tom, "team-a").status_code == 303
    page = tom.get("/datasets/notes")

    # the page is read in the dataset's project (tom views `default`): all but the rows
    assert page.status_code == 200, page.text
    assert 'id="profile-table"' in page.text and 'id="versions-table"' in page.text
    assert 'id="preview-table"' not in page.text
    assert (
        '<p id="preview-elsewhere">Rows are previewed only from the dataset\'s own project, '
        "default: switch to it in the nav to see them.</p>"
    ) in page.text
    assert _switch(tom, "default").status_code == 303
    shown = tom.get("/datasets/notes").text
    assert 'id="preview-table"' in shown and 'id="preview-elsewhere"' not in shown


def test_switching_to_a_project_the_caller_is_not_a_member_of_is_refused(
    tom: httpx.Client,
) -> None:
    refused = _switch(tom, "team-b")
    assert refused.status_code == 403
    assert "tom is not a member of the project &#39;team-b&#39;." in refused.text
    assert "forgeml_project" not in tom.cookies
    # a cookie set by hand is the API's own 403 on each page, whose nav switches back
    tom.cookies.set("forgeml_project", "team-b", domain="127.0.0.1")
    page = tom.get("/runs")
    assert page.status_code == 403
    assert "tom may not runs:read in the project &#39;team-b&#39;." in page.text
    assert '<option value="team-b" selected disabled>' in page.text
    assert _switch(tom, "default").status_code == 303
    assert tom.get("/runs").status_code == 200


def test_a_member_of_team_a_only_is_offered_it_on_defaults_refusal(
    served: Served, teams: str
) -> None:
    tara = signed_in(served.url, "tara")
    try:
        home = tara.get("/")
        assert home.status_code == 403
        assert '<option value="team-a">' in home.text
        assert '<option value="default" selected disabled>' in home.text
        assert _switch(tara, "team-a").status_code == 303
        page = tara.get("/runs")
        assert page.status_code == 200 and TEAM_RUN in page.text
    finally:
        tara.close()


@pytest.mark.parametrize("cookie", ["../etc", "a b", "%2e%2e", ".hidden", "x" * 200])
def test_a_malformed_project_cookie_is_ignored(tom: httpx.Client, cookie: str) -> None:
    tom.cookies.set("forgeml_project", cookie, domain="127.0.0.1")
    page = tom.get("/runs")
    assert page.status_code == 200
    assert DEFAULT_RUN in page.text and TEAM_RUN not in page.text


@pytest.mark.parametrize("project", ["../etc", "", "a b"])
def test_switching_to_a_malformed_name_is_a_page_naming_it(tom: httpx.Client, project: str) -> None:
    refused = _switch(tom, project)
    assert refused.status_code == 400, refused.text
    assert "Invalid project" in refused.text
    assert "forgeml_project" not in refused.headers.get("set-cookie", "")


def test_a_switch_without_the_csrf_token_is_refused(tom: httpx.Client) -> None:
    refused = tom.post("/project", data={"project": "team-a", "next": "/runs"})
    assert refused.status_code == 403 and "CSRF" in refused.text
    assert TEAM_RUN not in tom.get("/runs").text


def test_a_member_of_default_only_sees_no_switch(served: Served, teams: str) -> None:
    vic = signed_in(served.url, "vic")
    try:
        page = vic.get("/runs").text
        assert 'id="project-switch"' not in page and 'id="project-current"' not in page
        assert _switch(vic, "team-a").status_code == 403
    finally:
        vic.close()


def test_single_user_switches_among_every_project(tmp_path: Path) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        client = TestClient(create_app(workspace), base_url="http://localhost")
        assert 'id="project-switch"' not in client.get("/").text  # only `default`
        create_project(workspace, "team-a", actor="tester")
        assert '<option value="team-a">' in client.get("/").text
        assert _switch(client, "team-z").status_code == 404
        switched = _switch(client, "team-a")
        assert switched.status_code == 303
        page = client.get("/runs").text
        assert '<option value="team-a" selected>' in page
    finally:
        workspace.close()


def test_the_keys_and_cost_pages_show_the_chosen_projects_keys_only(
    served: Served, teams: str
) -> None:
    workspace = served.workspace
    person(workspace, served.settings, "kim", "admin", "team-a")
    create_key(workspace.in_project("team-a"), "key-of-team-a")
    create_key(workspace, "key-of-default")
    kim = signed_in(served.url, "kim")
    try:
        assert kim.get("/keys").status_code == 403  # no role in default
        assert _switch(kim, "team-a").status_code == 303
        keys = kim.get("/keys")
        assert keys.status_code == 200
        assert "key-of-team-a" in keys.text and "key-of-default" not in keys.text
        cost = kim.get("/cost")
        # budgets are the shared queues': kim reads them in team-a, as the queues
        assert cost.status_code == 200 and "Budgets" in cost.text
    finally:
        kim.close()


@pytest.mark.slow
def test_switching_the_project_in_the_nav_changes_the_runs_table(
    browser: Browser, teams: str
) -> None:
    context = browser.browser.new_context(base_url=browser.url)
    try:
        page = context.new_page()
        page.on("pageerror", lambda error: browser.errors.append(str(error)))
        page.goto("/login?next=/runs")
        page.fill("input[name=name]", teams)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{browser.url}/runs")
        table = page.locator("#runs-table")
        expect(table).to_contain_text(DEFAULT_RUN)
        expect(table).not_to_contain_text(TEAM_RUN)

        page.select_option("#project-select", "team-a")
        page.click("#project-switch button[type=submit]")
        page.wait_for_url(f"{browser.url}/runs")
        expect(table).to_contain_text(TEAM_RUN)
        expect(table).not_to_contain_text(DEFAULT_RUN)
        expect(page.locator("#project-select")).to_have_value("team-a")
        assert browser.errors == []
    finally:
        context.close()


def test_the_monitoring_page_shows_and_acknowledges_the_chosen_projects_alerts(
    tmp_path: Path,
) -> None:
    from forgeml.api._accounts import AccountsAuthorizer
    from forgeml.monitor.alerts import list_alerts, parse_message, receive
    from forgeml.serve.deployments import DeploymentSpec, _records
    from tests.auth._accounts import fast_settings

    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        settings = fast_settings(tmp_path)
        person(workspace, settings, "tara", "developer", "team-a")
        person(workspace, settings, "bob", "developer", "team-b")
        spec = DeploymentSpec(model="m@v1", model_ref="m@v1", replicas=1)
        with workspace.store.session() as session:
            in_a = workspace.in_project("team-a")
            _records._add_record(session, in_a, "web-a", spec, "failed", _records.now())
        alerts = [
            {
                "status": "firing",
                "labels": {"alertname": "Backlog", **labels},
                "annotations": {},
                "startsAt": "2026-12-03T10:00:00Z",
                "fingerprint": key,
            }
            for key, labels in (("f1", {"deployment": "web-a"}), ("f2", {"model": "x"}))
        ]
        receive(workspace, parse_message({"version": "4", "status": "firing", "receiver": "r",
                                          "alerts": alerts}))  # fmt: skip
        [alert] = list_alerts(workspace.in_project("team-a"))
        app = create_app(workspace, AccountsAuthorizer(workspace, settings))
        pages = {}
        for name, project in (("tara", "team-a"), ("bob", "team-b")):
            client = TestClient(app, base_url="http://localhost")
            client.get("/login")
            fields = {"name": name, "password": PASSWORD, "next": "/",
                      "csrf_token": client.cookies["forgeml_csrf"]}  # fmt: skip
            assert client.post("/login", data=fields, follow_redirects=False).status_code == 303
            assert _switch(client, project).status_code == 303  # type: ignore[arg-type]
            pages[name] = client

        shown = pages["tara"].get("/monitoring").text
        assert f'id="alert-{alert.id}"' in shown and "deployment=web-a" in shown
        assert "model=x" not in shown and "Acknowledge</button>" in shown
        assert "web-a" not in pages["bob"].get("/monitoring").text
        csrf = {"X-CSRF-Token": pages["bob"].cookies["forgeml_csrf"]}
        refused = pages["bob"].post(f"/monitoring/{alert.id}/ack", headers=csrf)
        assert refused.status_code == 403 and "belongs to the project" in refused.text
        csrf = {"X-CSRF-Token": pages["tara"].cookies["forgeml_csrf"]}
        acked = pages["tara"].post(f"/monitoring/{alert.id}/ack", headers=csrf)
        assert acked.status_code == 200 and "acknowledged by tara" in acked.text
    finally:
        workspace.close()
