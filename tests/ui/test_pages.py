"""The UI's pages over HTTP: security headers, CSRF, escaping, sign-in, and permissions that
are the API's own."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient

from forgeml.api._authz import PUBLIC, api_routes, route_permission
from forgeml.core.config import Settings, get_settings
from forgeml.core.workspace import Workspace
from forgeml.ui import create_app
from forgeml.ui._security import CONTENT_SECURITY_POLICY
from tests.cli.conftest import json_out
from tests.ui._seed import CALM, FEEDBACK_WINDOW, LABELLED, PASSWORD, SHIFTED, WRONG, XSS
from tests.ui.conftest import PAGE_TIMEOUT, Served

Clients = dict[str, httpx.Client]
PAGES = ["/", "/runs", "/jobs", "/datasets", "/datasets/notes", "/models", "/models/adult-mlp",
         "/datasets/notes@v1/diff?to=notes@v2", "/deployments", "/monitoring", "/cost",
         "/lineage", "/lineage/adult-mlp@v1", "/models/adult-mlp?version=1",
         "/monitoring?model=adult-mlp&window=300"]  # fmt: skip
# pages a viewer may not open (the permission their API route needs is a maintainer's)
ABOVE_VIEWER = {"/audit": "audit:read", "/keys": "keys:read", "/admin": "users:read"}


def _job_id(clients: Clients, name: str) -> str:
    jobs = clients["vic"].get("/api/v1/jobs").json()
    return next(job["job_id"] for job in jobs if job["name"] == name)


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers_with_the_content_security_policy(clients: Clients, path: str) -> None:
    answer = clients["vic"].get(path)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert answer.headers["x-frame-options"] == "DENY"
    assert "<script>" not in answer.text  # no inline script: every script has a src or is JSON


def test_a_page_without_a_session_sends_the_browser_to_sign_in(served: Served) -> None:
    answer = httpx.get(f"{served.url}/runs", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=/runs"


@contextmanager
def _fresh(served: Served) -> Iterator[tuple[httpx.Client, str]]:
    """A client with no session yet, and the CSRF token `/login` gave it."""
    with httpx.Client(base_url=served.url, timeout=PAGE_TIMEOUT) as client:
        client.get("/login")
        yield client, client.cookies["forgeml_csrf"]


def test_a_wrong_password_is_one_sentence_on_the_form(served: Served) -> None:
    with _fresh(served) as (client, token):
        answer = client.post(
            "/login", data={"name": "vic", "password": "nope", "csrf_token": token}
        )
        assert answer.status_code == 401
        assert 'id="login-error"' in answer.text
        assert "forgeml_session" not in client.cookies


def test_sign_in_never_redirects_off_the_server(served: Served) -> None:
    with _fresh(served) as (client, token):
        for target in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
            answer = client.post("/login", data={
                "name": "vic", "password": PASSWORD, "csrf_token": token, "next": target,
            })  # fmt: skip
            assert answer.headers["location"] == "/"


def test_a_csv_cells_markup_is_shown_escaped(served: Served, clients: Clients) -> None:
    page = clients["vic"].get("/datasets/notes").text
    assert XSS not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_a_change_without_the_csrf_token_is_refused(served: Served, clients: Clients) -> None:
    client = clients["mia"]
    job = _job_id(clients, "waiting-two")
    refused = client.post(f"/jobs/{job}/cancel")
    assert refused.status_code == 403
    assert "CSRF" in refused.text
    forged = client.post(f"/jobs/{job}/cancel", headers={"X-CSRF-Token": "x" * 43})
    assert forged.status_code == 403
    assert client.get(f"/api/v1/jobs/{job}").json()["cancel_requested"] is False
    login = httpx.post(f"{served.url}/login", data={"name": "vic", "password": "x"})
    assert login.status_code == 403


def test_a_viewer_sees_no_cancel_button_and_its_post_is_refused(
    served: Served, clients: Clients
) -> None:
    client = clients["vic"]
    job = _job_id(clients, "waiting-two")
    assert 'id="cancel-job"' not in client.get(f"/jobs/{job}").text
    token = client.cookies["forgeml_csrf"]
    refused = client.post(f"/jobs/{job}/cancel", headers={"X-CSRF-Token": token})
    assert refused.status_code == 403
    assert "may not jobs:cancel" in refused.text
    assert 'id="cancel-job"' in clients["mia"].get(f"/jobs/{job}").text


def test_the_promotion_history_is_left_out_for_a_role_without_audit_read(
    served: Served, clients: Clients
) -> None:
    assert 'id="promotion-history"' not in clients["vic"].get("/models/adult-mlp").text
    page = clients["mia"].get("/models/adult-mlp").text
    assert 'id="promotion-history"' in page and "model.register" in page


def test_a_bad_query_is_a_page_naming_it_and_the_api_stays_json(
    served: Served, clients: Clients
) -> None:
    client = clients["vic"]
    page = client.get("/runs", params={"col": "secret"})
    assert page.status_code == 422
    assert "no column &#39;secret&#39;" in page.text
    api = client.get("/api/v1/runs", params={"status": "DONE"})
    assert api.status_code == 422 and "error" in api.json()
    assert "content-security-policy" not in api.headers


def test_the_compare_page_charts_each_runs_curves_as_steps_and_values(clients: Clients) -> None:
    client = clients["vic"]
    found = client.get("/api/v1/runs", params={"name": "adult-mlp", "status": "FINISHED"})
    runs = [run["run_id"] for run in found.json()]
    page = client.get("/runs/compare", params={"run": runs})
    assert page.status_code == 200
    block = re.search(r'<script type="application/json" id="curves-data">(.*?)</script>', page.text)
    assert block is not None
    curves = orjson.loads(block.group(1))
    series = curves["train_loss"]  # one label a run logged it at more than one step
    assert series and {label.split()[-1] for label in series} <= {run[:8] for run in runs}
    for steps, values in series.values():
        assert len(steps) == len(values) > 1 and steps == sorted(steps)
    refused = client.get("/runs/compare", params={"run": runs[:1] * 101})
    assert refused.status_code == 422
    assert "Compare 2 to 100 runs: 101 were chosen." in refused.text


def test_every_page_route_declares_a_permission(tmp_path: Path) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        app = create_app(workspace)
        undeclared = [
            route.path for route in api_routes(app.routes) if route_permission(route) is None
        ]
        assert undeclared == []
        pages = {r.path: route_permission(r) for r in api_routes(app.routes)}
        assert pages["/runs"] == "runs:read" and pages["/jobs/{ref}/cancel"] == "jobs:cancel"
        assert pages["/login"] == PUBLIC
    finally:
        workspace.close()


def test_the_single_user_default_needs_no_sign_in(tmp_path: Path) -> None:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        client = TestClient(create_app(workspace), base_url="http://localhost")
        home = client.get("/")
        assert home.status_code == 200 and "tester" in home.text
        assert client.get("/login", follow_redirects=False).headers["location"] == "/"
        assert client.get("/static/htmx.min.js").status_code == 200
    finally:
        workspace.close()


@pytest.mark.parametrize(("path", "permission"), ABOVE_VIEWER.items())
def test_a_viewer_neither_sees_nor_opens_a_page_above_its_role(
    clients: Clients, path: str, permission: str
) -> None:
    refused = clients["vic"].get(path)
    assert refused.status_code == 403
    assert f"may not {permission}" in refused.text
    assert f'href="{path}"' not in clients["vic"].get("/").text
    assert f'href="{path}"' in clients["ada"].get("/").text
    assert clients["ada"].get(path).status_code == 200


def test_the_audit_page_says_the_chain_verifies(clients: Clients) -> None:
    page = clients["mia"].get("/audit", params={"action": "model.register"}).text
    assert "The chain verifies" in page
    assert page.count("model.register") >= 3


def test_the_admin_page_lists_accounts_and_tokens_for_who_manages_them(clients: Clients) -> None:
    page = clients["ada"].get("/admin").text
    assert all(name in page for name in ("ada", "mia", "vic"))
    assert 'id="tokens-table"' in page
    assert 'id="tokens-table"' not in clients["mia"].get("/admin").text  # no tokens:manage
    keys = clients["mia"].get("/keys").text
    assert "web-app" in keys and "10000" in keys


def test_a_deployment_shows_its_traffic_split_and_replicas(clients: Clients) -> None:
    page = clients["vic"].get("/deployments").text
    assert "adult-api-model@v1 (80%)" in page
    assert "adult-api-model@v2 (20%)" in page
    assert page.count("primary adult-api-model@v1") == 2
    assert page.count(":9103 ready") == 1


def test_the_lineage_page_shows_the_routes_graph_as_tables_and_its_svg(clients: Clients) -> None:
    client = clients["vic"]
    graph = client.get("/api/v1/lineage/adult-mlp@v1").json()
    page = client.get("/lineage/adult-mlp@v1").text
    assert 'src="/api/v1/lineage/adult-mlp%40v1?format=svg"' in page
    assert page.count("<tr") - 2 == len(graph["nodes"]) + len(graph["edges"])
    assert {n["kind"] for n in graph["nodes"]} >= {"dataset", "run", "model"}
    for node in graph["nodes"]:
        assert f"<td>{node['kind']}</td>" in page
    svg = client.get("/api/v1/lineage/adult-mlp%40v1", params={"format": "svg"})
    assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
    assert svg.text.lstrip().startswith("<?xml") and "<svg" in svg.text


def test_the_model_run_and_dataset_pages_link_to_their_lineage(clients: Clients) -> None:
    client = clients["vic"]
    model = client.get("/api/v1/models/adult-mlp@v1").json()
    assert 'href="/lineage/model:adult-mlp@v1"' in client.get("/models/adult-mlp").text
    run_page = client.get(f"/runs/{model['run_id']}").text
    assert f'href="/lineage/run:{model["run_id"]}"' in run_page
    dataset = client.get(f"/datasets/{model['dataset']}").text
    assert f'href="/lineage/dataset:{model["dataset"]}"' in dataset
    answer = client.get(f"/lineage/run:{model['run_id']}")
    assert answer.status_code == 200 and "adult-mlp@v1" in answer.text


def test_the_lineage_form_sends_its_reference_to_the_lineage_page(clients: Clients) -> None:
    answer = clients["vic"].get(
        "/lineage", params={"record": " adult-mlp@v1 "}, follow_redirects=False
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/lineage/adult-mlp@v1"
    assert 'id="lineage-form"' in clients["vic"].get("/lineage").text


@pytest.mark.parametrize(
    ("path", "status", "sentence"),
    [
        ("/lineage/nosuch@v9", 404, "nosuch@v9"),
        ("/lineage/bad%20ref", 422, "record"),
        ("/models/adult-mlp?version=99", 404, "Model adult-mlp has no version 99."),
    ],
)
def test_a_lineage_or_card_of_nothing_is_a_page_naming_it(
    clients: Clients, path: str, status: int, sentence: str
) -> None:
    answer = clients["vic"].get(path)
    assert answer.status_code == status
    assert sentence in answer.text
    assert answer.headers["content-type"].startswith("text/html")


def test_the_model_page_embeds_the_card_body_and_the_fairness_table(clients: Clients) -> None:
    client = clients["vic"]
    page = client.get("/models/adult-mlp", params={"version": 1}).text
    card = client.get("/api/v1/models/adult-mlp/versions/1/card", params={"format": "html"})
    document = card.json()["card"]
    assert page.count("<html") == 1 and "<style>" not in page  # the card's body only
    body = document[document.index("<body>") + 6 : document.rindex("</body>")]
    assert body.strip() and body in page
    metrics = client.get("/api/v1/models/adult-mlp@v1").json()["metrics"]
    measures = [k for k in metrics if "fairness/" in k]
    assert measures, "the Adult config's data.slices give fairness measures"
    table = page[
        page.index('id="fairness-table"') : page.index(
            "</table>", page.index('id="fairness-table"')
        )
    ]
    assert table.count("<tr>") == len(measures) + 1
    assert "dp_diff" in table and "<td>sex</td>" in table


def test_the_card_shows_a_note_as_text_never_markup(served: Served, clients: Clients) -> None:
    note = "<script>alert(1)</script> only for **tests**"
    token = clients["mia"].cookies["forgeml_csrf"]
    answer = clients["mia"].put(
        "/api/v1/models/adult-small/versions/1/card", json={"limitations": note},
        headers={"X-CSRF-Token": token},
    )  # fmt: skip
    assert answer.status_code == 200, answer.text
    page = clients["vic"].get("/models/adult-small").text
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def _drift_block(html: str) -> dict[str, object]:
    opening = '<script type="application/json" id="drift-data">'
    start = html.index(opening) + len(opening)
    loaded: dict[str, object] = orjson.loads(html[start : html.index("</script>", start)])
    return loaded


def test_the_monitoring_page_charts_what_the_cli_prints_for_the_same_log(
    served: Served, clients: Clients, cli: object, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # as the form sends it: the deployment field left empty
    asked = {"state": "all", "deployment": "", "model": "adult-mlp", "window": 300}
    page = clients["vic"].get("/monitoring", params=asked)
    assert page.status_code == 200, page.text
    chart = _drift_block(page.text)
    api = clients["vic"].get("/api/v1/monitor/drift", params={"model": "adult-mlp", "window": 300})
    assert api.status_code == 200, api.text
    monkeypatch.setenv("FORGEML_HOME", str(served.workspace.settings.home))
    get_settings.cache_clear()
    png = tmp_path / "drift.png"
    args = ("monitor", "drift", "adult-mlp", "--window", "300", "--png", png, "--json")
    printed = json_out(cli(*args))  # type: ignore[operator]

    windows = printed["windows"]
    assert api.json()["windows"] == windows
    assert [w["rows"] for w in windows] == [300] * ((CALM + SHIFTED) // 300)
    assert chart["x"] == [w["end"] for w in windows]
    series = chart["series"]
    assert isinstance(series, dict) and set(series) == set(windows[0]["scores"])
    assert series["age"] == [w["scores"]["age"] for w in windows]
    # the calm windows do not flag age; the shifted ones (age + 15) do
    assert ["age" in w["drifted"] for w in windows] == [False] * 3 + [True] * 2
    assert api.json()["columns"] == printed["columns"]
    assert '<tr data-feature="age"><td>age</td><td>ks</td>' in page.text
    assert page.text.count("<tr data-feature=") == len(printed["columns"])


@pytest.mark.parametrize(
    ("params", "status", "sentence"),
    [
        ({"deployment": "nosuch"}, 404, "No live deployment is called 'nosuch'."),
        ({"model": "nosuch"}, 404, "nosuch"),
        ({"model": "adult-mlp", "window": 0}, 422, "window"),
        ({"model": "adult-mlp", "window": "many"}, 422, "window"),
        ({}, 400, "Give deployment or model, one of the two."),
    ],
)
def test_bad_drift_queries_are_json_errors_and_pages_naming_them(
    clients: Clients, params: dict[str, object], status: int, sentence: str
) -> None:
    api = clients["vic"].get("/api/v1/monitor/drift", params=params)  # type: ignore[arg-type]
    assert api.status_code == status, api.text
    assert sentence in api.json()["error"]
    if params:  # the page without a target shows alerts alone
        page = clients["vic"].get("/monitoring", params=params)  # type: ignore[arg-type]
        assert page.status_code == status
        assert "<!doctype html>" in page.text.lower()


EXPLAIN_PAGE = "/models/adult-mlp/versions/1/explain"


def _explain_form(client: httpx.Client, row: object) -> httpx.Response:
    token = client.cookies["forgeml_csrf"]
    text = row if isinstance(row, str) else json.dumps(row)
    return client.post(EXPLAIN_PAGE, data={"row": text}, headers={"X-CSRF-Token": token})


def _prefilled(page: str) -> dict[str, object]:
    found = re.search(r'<textarea id="explain-row"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, "no explain form"
    return dict(json.loads(html.unescape(found[1])))


def test_the_explain_form_answers_what_the_api_answers(clients: Clients) -> None:
    client = clients["vic"]  # a viewer reads models: they may explain
    row = _prefilled(client.get("/models/adult-mlp").text)
    assert "age" in row and "income" not in row  # a training row, its label left out

    answer = _explain_form(client, row)
    api = client.post("/api/v1/models/adult-mlp/versions/1/explain", json={"inputs": [row]})

    assert answer.status_code == 200, answer.text
    explained = api.json()["explanations"][0]
    block = re.search(r"data-attributions='([^']*)'", answer.text)
    assert block
    chart = json.loads(block[1])
    assert chart["features"][::-1] == [a["feature"] for a in explained["attributions"]]
    assert chart["values"][::-1] == [a["value"] for a in explained["attributions"]]
    assert f"= {explained['prediction']:.4g}" in answer.text
    assert f"<strong>{explained['label']}</strong>" in html.unescape(answer.text)
    rows = re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td></tr>", answer.text)
    assert rows == [(a["feature"], f"{a['value']:+.4f}") for a in explained["attributions"]]


def test_an_xss_payload_in_a_row_shows_escaped(clients: Clients) -> None:
    client = clients["vic"]
    row = _prefilled(client.get("/models/adult-mlp").text)

    as_value = _explain_form(client, row | {"workclass": XSS})
    as_field = _explain_form(client, row | {XSS: 1})

    assert as_value.status_code == 200 and XSS not in as_value.text
    assert as_field.status_code == 422
    assert XSS not in as_field.text and html.escape(XSS, quote=False) in as_field.text


@pytest.mark.parametrize(
    ("path", "row", "status", "sentence"),
    [
        (EXPLAIN_PAGE, "{not json", 400, "The row is not JSON"),
        (EXPLAIN_PAGE, "[1, 2]", 400, "Give one row"),
        (EXPLAIN_PAGE, {"age": 39}, 422, "workclass"),
        ("/models/adult-mlp/versions/9/explain", {"age": 39}, 404, "has no version v9"),
    ],
)
def test_a_row_the_model_cannot_explain_answers_its_sentence(
    clients: Clients, path: str, row: object, status: int, sentence: str
) -> None:
    client = clients["vic"]
    token = client.cookies["forgeml_csrf"]
    text = row if isinstance(row, str) else json.dumps(row)

    answer = client.post(path, data={"row": text}, headers={"X-CSRF-Token": token})

    assert answer.status_code == status
    assert 'id="explain-error"' in answer.text and sentence in html.unescape(answer.text)


def test_the_explain_form_needs_the_csrf_token(clients: Clients) -> None:
    answer = clients["vic"].post(EXPLAIN_PAGE, data={"row": "{}"})

    assert answer.status_code == 403


GROUP_MEASURES = ("accuracy", "tpr", "fpr", "selection_rate")


def _scoped(served: Served, *scopes: str) -> dict[str, str]:
    """The Authorization header of a token of vic's that holds only `scopes`."""
    from forgeml.auth import issue_token

    name = "only-" + "-".join(s.replace(":", "-") for s in scopes)
    token = issue_token(served.workspace, "vic", name, actor="vic", scopes=scopes)[1]
    return {"Authorization": f"Bearer {token}"}


def _fairness_rows(page: str) -> dict[tuple[str, str], list[tuple[str, ...]]]:
    """Each fairness-groups table's rows by (split, column), as cell texts."""
    found = {}
    for table in re.finditer(
        r'<table class="fairness-groups" data-split="([^"]+)" data-column="([^"]+)">(.*?)</table>',
        page,
        re.S,
    ):
        body = table[3][table[3].index("<tbody>") :]
        found[(table[1], table[2])] = [
            tuple(html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row))
            for row in re.findall(r"<tr>(.*?)</tr>", body)
        ]
    return found


def test_the_run_and_model_pages_show_the_fairness_groups_the_api_answers(
    clients: Clients,
) -> None:
    client = clients["vic"]
    run_id = client.get("/api/v1/models/adult-mlp@v1").json()["run_id"]
    api = client.get(f"/api/v1/runs/{run_id}/fairness").json()

    run_page = client.get(f"/runs/{run_id}").text
    model_page = client.get("/models/adult-mlp", params={"version": 1}).text

    expected = {
        (t["split"], t["column"]): [
            (
                g["group"],
                str(int(g["count"])),
                *("-" if g[m] is None else f"{g[m]:.4g}" for m in GROUP_MEASURES),
            )
            for g in t["groups"]
        ]
        for t in api["tables"]
    }
    assert ("validation", "sex") in expected and ("test", "race") in expected
    assert _fairness_rows(run_page) == expected
    assert _fairness_rows(model_page) == expected
    sex = next(t for t in api["tables"] if t["split"] == "validation" and t["column"] == "sex")
    assert f"demographic parity difference {sex['dp_diff']:.4g}" in run_page
    assert f'href="/runs/{run_id}">run {run_id[:8]}</a>' in model_page


def test_the_fairness_groups_are_left_out_for_a_token_without_runs_read(
    served: Served, clients: Clients
) -> None:
    page = httpx.get(f"{served.url}/models/adult-mlp", headers=_scoped(served, "models:read"))
    assert page.status_code == 200, page.text
    assert 'id="fairness-table"' in page.text  # the version's own metrics
    assert 'id="fairness-groups"' not in page.text
    assert 'id="fairness-groups"' in clients["vic"].get("/models/adult-mlp").text


def test_a_group_named_by_an_xss_payload_shows_escaped(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from forgeml.tracking import finish_run, log_json_artifact, start_run
    from forgeml.train.fairness import FAIRNESS_ARTIFACT, fairness_report
    from tests.train.conftest import copy_empty_home

    home = copy_empty_home(tmp_path_factory, tmp_path / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    try:
        handle = start_run(workspace, {}, "xss", None, experiment="xss")
        y_true, y_pred = [1, 0, 1, 0, 1, 1], [1, 0, 0, 0, 1, 0]
        report = fairness_report(y_true, y_pred, {"note": [XSS, "ann"] * 3})
        log_json_artifact(handle, {"validation": report.table()}, FAIRNESS_ARTIFACT)
        finish_run(handle, "FINISHED", report.metrics)
        client = TestClient(create_app(workspace), base_url="http://localhost")

        page = client.get(f"/runs/{handle.run_id}").text
    finally:
        workspace.close()

    rows = _fairness_rows(page)[("validation", "note")]
    assert XSS not in page
    assert html.escape(XSS, quote=False) in page
    assert sorted(row[0] for row in rows) == sorted([XSS, "ann"])


def test_the_monitoring_page_shows_the_accuracy_from_feedback_the_api_answers(
    clients: Clients,
) -> None:
    client = clients["vic"]
    params = {"model": "adult-mlp", "window": 300}

    page = client.get("/monitoring", params=params).text
    api = client.get("/api/v1/monitor/accuracy", params=params).json()

    assert api["labelled_rows"] == LABELLED
    assert api["accuracy"] == (LABELLED - WRONG) / LABELLED
    row = re.search(r'<table id="accuracy-table">.*?<tbody><tr[^>]*>(.*?)</tr>', page, re.S)
    assert row, "no accuracy table"
    cells = re.findall(r"<td>(.*?)</td>", row[1])
    assert cells[:4] == ["adult-mlp@v1", "300", str(LABELLED), f"{api['accuracy']:.4g}"]
    assert cells[6] == f"{api['reference_accuracy']:.4g}"
    assert 'id="accuracy-none"' not in page
    assert 'id="drift-table"' in page  # the drift of the same window beside it


def test_the_monitoring_page_charts_accuracy_by_window_as_the_api_answers(
    clients: Clients,
) -> None:
    client = clients["vic"]
    params = {"model": "adult-mlp", "window": FEEDBACK_WINDOW}

    page = client.get("/monitoring", params=params).text
    api = client.get("/api/v1/monitor/accuracy/windows", params=params).json()

    windows = api["windows"]
    assert [w["accuracy"] for w in windows] == pytest.approx([1.0, 0.9, 0.8, 0.7])
    opening = '<script type="application/json" id="accuracy-data">'
    start = page.index(opening) + len(opening)
    chart = orjson.loads(page[start : page.index("</script>", start)])
    assert chart["series"]["measured accuracy"] == [w["accuracy"] for w in windows]
    assert chart["series"]["estimated accuracy"] == [w["estimated_accuracy"] for w in windows]
    assert chart["x"] == [datetime.fromisoformat(w["end"]).timestamp() for w in windows]
    assert chart["reference"] == api["reference_accuracy"]
    table = page[page.index('id="accuracy-windows"') : page.index("</table>", start)]
    measured = [
        r[3]
        for r in re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td><td>(.*?)</td>", table)
    ]
    assert measured == [f"{w['accuracy']:.4g}" for w in windows]


def test_the_monitoring_page_says_when_no_prediction_was_labelled(clients: Clients) -> None:
    # adult-small was never served: no feedback, and no request log to score drift on
    answer = clients["vic"].get("/monitoring", params={"model": "adult-small", "window": 300})

    assert answer.status_code == 200, answer.text
    assert 'id="accuracy-none"' in answer.text and "No feedback yet" in answer.text
    assert 'id="accuracy-windows"' not in answer.text  # no window to chart
    assert 'id="drift-error"' in answer.text and "No request log" in answer.text


def test_the_monitoring_readings_are_left_out_for_a_token_without_deployments_read(
    served: Served,
) -> None:
    page = httpx.get(
        f"{served.url}/monitoring",
        params={"model": "adult-mlp", "window": 300},
        headers=_scoped(served, "alerts:read"),
    )
    assert page.status_code == 200, page.text
    assert 'id="alerts-table"' in page.text
    for section in ("drift-form", "accuracy-table", "drift-table", "accuracy-windows"):
        assert f'id="{section}"' not in page.text


@pytest.mark.parametrize(
    ("fields", "sentence"),
    [
        ({"method": "lime"}, "Unknown method 'lime'"),
        ({"top": "0"}, "Top must be a whole number of 1 or more, not '0'."),
        ({"top": "two"}, "not 'two'"),
        ({"background": "201"}, "Background must be a whole number of 1 to 200 rows"),
    ],
)
def test_bad_explain_options_answer_their_sentence(
    clients: Clients, fields: dict[str, str], sentence: str
) -> None:
    client = clients["vic"]
    row = _prefilled(client.get("/models/adult-mlp").text)
    token = client.cookies["forgeml_csrf"]

    answer = client.post(
        EXPLAIN_PAGE, data={"row": json.dumps(row), **fields}, headers={"X-CSRF-Token": token}
    )

    assert answer.status_code == 422
    assert sentence in html.unescape(answer.text)


def test_the_explain_options_reach_the_api(clients: Clients) -> None:
    client = clients["vic"]
    page = client.get("/models/adult-mlp").text
    assert re.findall(r'<option value="([a-z_]+)">', page) == [
        "kernel_shap", "integrated_gradients"
    ]  # fmt: skip
    row = _prefilled(page)
    token = client.cookies["forgeml_csrf"]
    fields = {"method": "integrated_gradients", "top": "3", "background": "20"}

    answer = client.post(
        EXPLAIN_PAGE, data={"row": json.dumps(row), **fields}, headers={"X-CSRF-Token": token}
    )
    api = client.post(
        "/api/v1/models/adult-mlp/versions/1/explain",
        json={"inputs": [row], "method": "integrated_gradients", "top": 3, "background": 20},
    ).json()["explanations"][0]

    assert answer.status_code == 200, answer.text
    assert api["method"] == "integrated_gradients" and len(api["attributions"]) == 3
    rows = re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td></tr>", answer.text)
    assert rows == [(a["feature"], f"{a['value']:+.4f}") for a in api["attributions"]]
    assert "by integrated_gradients" in answer.text
