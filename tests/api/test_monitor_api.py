"""`GET /api/v1/monitor/drift` over real HTTP: drift per feature over time from a served
model's request log (adult-mlp's, whose later rows are older people), its bounds, and its
JSON errors."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from forgeml.api import api_in_thread
from forgeml.core.config import Settings, get_settings
from forgeml.core.errors import OtherProjectError
from forgeml.core.store import DeploymentRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.accuracy import model_calibration
from forgeml.monitor.drift import detect_drift, model_reference, read_requests, request_log_path
from tests.cli.conftest import assert_cli_error, json_out
from tests.gateway.conftest import add_deployment
from tests.train.conftest import copy_home, trained_adult_template
from tests.ui._seed import (
    CALM,
    FEEDBACK_WINDOW,
    LABELLED,
    LOGGED_AT,
    SHIFTED,
    label_adult_predictions,
    log_adult_requests,
)

ROWS = CALM + SHIFTED


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Workspace]]:
    root = tmp_path_factory.mktemp("monitor-api")
    home = copy_home(trained_adult_template(tmp_path_factory), root / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    log_adult_requests(workspace)
    # a deployment serving adult-mlp@v1 under its own name, and its replicas' log
    add_deployment(workspace, "census", ["http://127.0.0.1:9111"])
    with workspace.store.session() as session:
        record = session.scalars(select(DeploymentRecord).filter_by(name="census")).one()
        record.spec = {**record.spec, "model": "adult-mlp@v1", "model_ref": "adult-mlp"}
    log_adult_requests(workspace, "census")
    try:
        with api_in_thread(workspace) as url, httpx.Client(base_url=url, timeout=60) as client:
            yield client, workspace
    finally:
        workspace.close()


def _drift(client: httpx.Client, **params: Any) -> dict[str, Any]:
    answer = client.get("/api/v1/monitor/drift", params=params)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def test_a_deployment_s_windows_show_the_shift_where_the_log_has_it(
    api: tuple[httpx.Client, Workspace],
) -> None:
    client, workspace = api
    body = _drift(client, deployment="census", window=300)

    assert (body["reference"], body["served"], body["deployment"]) == ("adult-mlp@v1", "census",
                                                                        "census")  # fmt: skip
    assert body["logged_rows"] == ROWS
    windows = body["windows"]
    assert [(w["index"], w["rows"]) for w in windows] == [(k * 300, 300) for k in range(5)]
    assert windows[0]["start"] == LOGGED_AT and windows[-1]["end"] == LOGGED_AT + ROWS / 50 - 1
    assert [w["scores"]["age"] > 1 for w in windows] == [False] * 3 + [True] * 2
    assert ["age" in w["drifted"] for w in windows] == [False] * 3 + [True] * 2
    # the latest window's tests: detect_drift over the log's last 300 rows, as computed here
    _, profile = model_reference(workspace, "adult-mlp@v1")
    latest = read_requests([request_log_path(workspace, "census")], "census", 300).frame
    report = detect_drift(
        profile, latest, None, [c for c in latest.columns if c in profile.columns]
    )
    assert body["columns"] == [c.model_dump(mode="json") for c in report.columns]
    age = next(c for c in body["columns"] if c["column"] == "age")
    assert age["test"] == "ks" and age["p_value"] < 1e-6 and age["drifted"]


def test_windows_are_bounded_and_keep_their_place_in_the_log(
    api: tuple[httpx.Client, Workspace],
) -> None:
    client, _ = api
    body = _drift(client, model="adult-mlp@v1", window=400, windows=2)

    # 1500 rows in windows of 400: the latest two start at 800 and 1200 (the last is short)
    assert [(w["index"], w["rows"]) for w in body["windows"]] == [(800, 400), (1200, 300)]
    assert body["reference"] == "adult-mlp@v1" and body["deployment"] is None


def test_a_models_reference_is_read_in_its_datas_project_save_by_the_server(
    api: tuple[httpx.Client, Workspace], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, workspace = api
    sentence = "Dataset 'adult' belongs to the project 'default', not 'team-b'"
    monkeypatch.setenv("FORGEML_HOME", str(workspace.settings.home))
    monkeypatch.setenv("FORGEML_PROJECT", "team-b")
    get_settings.cache_clear()

    # adult-mlp@v1's reference is kept by now: it is refused all the same; so is the
    # validation split a version's accuracy is calibrated on
    for args in (("drift", "adult-mlp@v1"), ("drift", "census"), ("online", "adult-mlp@v1"),
                 ("accuracy", "adult-small@v1")):  # fmt: skip
        assert_cli_error(cli("monitor", *args), sentence)
    in_b = workspace.in_project("team-b")
    with pytest.raises(OtherProjectError, match=sentence):
        model_reference(in_b, "adult-mlp@v1")
    # what the server reads for its gauges, or for a route authorized in the model's project
    assert model_reference(in_b, "adult-mlp@v1", any_project=True)[0] == "adult-mlp@v1"
    assert _drift(client, model="adult-mlp@v1", window=400)["reference"] == "adult-mlp@v1"
    with pytest.raises(OtherProjectError, match=sentence):
        model_calibration(in_b, "adult-small@v1")
    assert model_calibration(in_b, "adult-small@v1", any_project=True).model == "adult-small@v1"


@pytest.mark.parametrize(
    ("params", "status", "sentence"),
    [
        ({"deployment": "nosuch"}, 404, "No live deployment is called 'nosuch'."),
        ({"model": "nosuch@v1"}, 404, "nosuch"),
        ({"model": "adult-small"}, 404, "No request log at "),
        ({"model": "adult-mlp", "window": 9}, 422, "window"),
        ({"model": "adult-mlp", "window": 20_001}, 422, "window"),
        ({"model": "adult-mlp", "windows": 25}, 422, "windows"),
        ({"model": "adult-mlp", "window": "all"}, 422, "window"),
        ({"deployment": "census", "model": "adult-mlp"}, 400, "one of the two"),
        ({}, 400, "Give deployment or model, one of the two."),
        ({"deployment": "<script>"}, 422, "deployment"),
    ],
)
def test_bad_input_is_one_json_sentence(
    api: tuple[httpx.Client, Workspace], params: dict[str, Any], status: int, sentence: str
) -> None:
    client, _ = api
    answer = client.get("/api/v1/monitor/drift", params=params)
    assert answer.status_code == status, answer.text
    assert sentence in answer.json()["error"]


def test_accuracy_is_what_the_cli_prints_for_the_same_workspace(
    api: tuple[httpx.Client, Workspace], cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, workspace = api
    # adult-small was never served: no feedback and no log (the seeded logs hold requests,
    # not a server's answers), so what is measured is its validation split's accuracy
    answer = client.get("/api/v1/monitor/accuracy", params={"model": "adult-small@v1"})
    assert answer.status_code == 200, answer.text
    monkeypatch.setenv("FORGEML_HOME", str(workspace.settings.home))
    get_settings.cache_clear()

    printed = json_out(cli("monitor", "accuracy", "adult-small@v1", "--json"))

    assert answer.json() == printed
    assert printed["served"] == "adult-small" and printed["labelled_rows"] == 0
    assert 0.5 < printed["reference_accuracy"] <= 1


ACCURACY = "/api/v1/monitor/accuracy"


@pytest.mark.parametrize(
    ("route", "params", "status", "sentence"),
    [
        (ACCURACY, {"deployment": "nosuch"}, 404, "nosuch"),
        (ACCURACY, {"model": "nosuch@v1"}, 404, "nosuch"),
        (ACCURACY, {"model": "adult-mlp", "window": 0}, 422, "window"),
        (ACCURACY, {}, 400, "Give deployment or model, one of the two."),
        (f"{ACCURACY}/windows", {"model": "adult-mlp", "window": 5000, "windows": 24}, 400,
         "over the limit of 100000"),
        (f"{ACCURACY}/windows", {"model": "adult-mlp", "windows": 25}, 422, "windows"),
        (f"{ACCURACY}/windows", {"deployment": "nosuch"}, 404, "nosuch"),
        (f"{ACCURACY}/windows", {}, 400, "Give deployment or model, one of the two."),
    ],
)  # fmt: skip
def test_bad_accuracy_queries_are_one_json_sentence(
    api: tuple[httpx.Client, Workspace],
    route: str,
    params: dict[str, Any],
    status: int,
    sentence: str,
) -> None:
    client, _ = api
    answer = client.get(route, params=params)
    assert answer.status_code == status, answer.text
    assert sentence in answer.json()["error"]


def test_a_log_without_rows_for_the_model_is_a_json_sentence(
    api: tuple[httpx.Client, Workspace],
) -> None:
    client, workspace = api
    log = request_log_path(workspace, "adult-small")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_bytes(b"")  # the server started, nobody has asked it anything yet
    try:
        answer = client.get("/api/v1/monitor/drift", params={"model": "adult-small"})
    finally:
        log.unlink()

    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "empty_window"
    assert "holds no rows for model 'adult-small' yet." in answer.json()["error"]


def test_accuracy_by_window_measures_each_window_of_feedback(
    api: tuple[httpx.Client, Workspace],
) -> None:
    client, workspace = api
    label_adult_predictions(workspace)  # window j of 10, oldest first, holds j wrong
    route = "/api/v1/monitor/accuracy/windows"

    every = client.get(route, params={"model": "adult-mlp", "window": FEEDBACK_WINDOW}).json()
    latest = client.get(route, params={"model": "adult-mlp", "window": 10, "windows": 2}).json()
    uneven = client.get(route, params={"model": "adult-mlp", "window": 15}).json()
    overall = client.get("/api/v1/monitor/accuracy", params={"model": "adult-mlp", "window": 40})

    assert every["labelled_rows"] == LABELLED and every["model"] == "adult-mlp@v1"
    assert [w["accuracy"] for w in every["windows"]] == pytest.approx([1.0, 0.9, 0.8, 0.7])
    assert [w["rows"] for w in every["windows"]] == [10] * 4
    assert every["windows"][-1]["end"] == datetime.fromtimestamp(LOGGED_AT + 39, UTC).isoformat()
    assert latest["windows"] == every["windows"][-2:]
    assert [w["rows"] for w in uneven["windows"]] == [15, 15]  # the 10 oldest left out
    assert overall.json()["accuracy"] == pytest.approx(
        sum(w["accuracy"] for w in every["windows"]) / 4
    )


def test_accuracy_by_window_of_a_model_without_feedback_is_empty(
    api: tuple[httpx.Client, Workspace],
) -> None:
    client, _ = api
    answer = client.get("/api/v1/monitor/accuracy/windows", params={"model": "adult-small@v1"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["windows"] == [] and answer.json()["labelled_rows"] == 0
