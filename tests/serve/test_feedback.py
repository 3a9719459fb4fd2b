"""Request ids and `POST /v2/models/NAME/feedback` on real servers over the Adult MLP."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from forgeml.core.store import AuditEvent, FeedbackRecord
from forgeml.gateway import create_key
from forgeml.serve import ServeOptions
from forgeml.serve._supervisor import free_port
from forgeml.serve.feedback import predictions_in_log
from tests._wait import wait_until
from tests.gateway.conftest import add_deployment
from tests.serve.conftest import LiveServer, adult_records, open_home
from tests.train.conftest import (
    copy_home,
    forgeml_command,
    subprocess_env,
    trained_adult_template,
)

PREDICT = "/v1/models/adult-mlp:predict"
INFER = "/v2/models/adult-mlp/infer"
FEEDBACK = "/v2/models/adult-mlp/feedback"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    template = trained_adult_template(tmp_path_factory)
    return copy_home(template, tmp_path_factory.mktemp("feedback") / "home")


@pytest.fixture(scope="module")
def replicas(home: Path) -> Iterator[tuple[LiveServer, LiveServer, Path]]:
    """Two replicas of one model sharing one request log, each keeping 2 requests in memory."""
    log = home / "logs" / "requests" / "adult-mlp.jsonl"
    options = ServeOptions(log_sample_rate=1.0, log_redact=["fnlwgt"], feedback_window=2)
    workspaces = [open_home(home), open_home(home)]
    first = LiveServer(workspaces[0], ["adult-mlp@v1"], options).start()
    second = LiveServer(workspaces[1], ["adult-mlp@v1"], options).start()
    yield first, second, log
    for server in (first, second):
        server.stop()
    for workspace in workspaces:
        workspace.close()


def _predict(url: str, rows: list[dict[str, Any]], **headers: str) -> httpx.Response:
    response = httpx.post(f"{url}{PREDICT}", json={"instances": rows}, headers=headers)
    assert response.status_code == 200, response.text
    return response


def _stored(home: Path) -> tuple[int, int]:
    """Feedback rows and audit events in the store."""
    workspace = open_home(home)
    try:
        with workspace.store.session() as session:
            rows = session.scalar(select(func.count()).select_from(FeedbackRecord)) or 0
            events = session.scalar(select(func.count()).select_from(AuditEvent)) or 0
    finally:
        workspace.close()
    return rows, events


def _logged(log: Path, request_id: str) -> None:
    wait_until(
        lambda: request_id in predictions_in_log(log, "adult-mlp", {request_id}),
        30,
        f"the request log holding {request_id}",
    )


def test_every_answer_carries_a_request_id(replicas: Any) -> None:
    first, _, _ = replicas
    rows = adult_records(2)
    minted = _predict(first.url, rows).headers["x-request-id"]
    again = _predict(first.url, rows).headers["x-request-id"]
    assert minted and again and minted != again
    assert _predict(first.url, rows, **{"x-request-id": "mine-1"}).headers["x-request-id"] == (
        "mine-1"
    )
    unusable = _predict(first.url, rows, **{"x-request-id": "has space"})
    assert unusable.headers["x-request-id"] not in ("has space", "")

    tensor = {"name": "age", "shape": [1], "datatype": "INT64", "data": [39]}
    inputs = [tensor] + [
        {
            "name": k,
            "shape": [1],
            "datatype": "BYTES" if isinstance(v, str) else "INT64",
            "data": [v],
        }
        for k, v in rows[0].items()
        if k != "age"
    ]
    echoed = httpx.post(f"{first.url}{INFER}", json={"id": "v2-7", "inputs": inputs})
    assert echoed.status_code == 200, echoed.text
    assert echoed.json()["id"] == "v2-7" and echoed.headers["x-request-id"] == "v2-7"
    given = httpx.post(f"{first.url}{INFER}", json={"inputs": inputs})
    assert given.json()["id"] == given.headers["x-request-id"] != ""

    refused = httpx.post(f"{first.url}{PREDICT}", json={"instances": [{"age": "old"}]})
    assert refused.status_code == 422 and refused.headers["x-request-id"]
    embeddings = httpx.post(f"{first.url}/v1/embeddings", json={"model": "adult-mlp", "input": "x"})
    assert embeddings.status_code == 400 and embeddings.headers["x-request-id"]


def test_feedback_joins_the_label_to_the_prediction_and_features(replicas: Any, home: Path) -> None:
    first, _, _ = replicas
    rows = adult_records(3, offset=10)
    request_id = f"three-rows-{uuid.uuid4().hex}"
    answer = _predict(first.url, rows, **{"x-request-id": request_id}).json()
    before, events = _stored(home)

    labels = ["<=50K", ">50K", "<=50K"]
    response = httpx.post(f"{first.url}{FEEDBACK}", json={"id": request_id, "label": labels})
    assert response.status_code == 200, response.text
    assert response.json() == {"recorded": 3, "requests": 1}
    assert "x-request-id" in response.headers
    workspace = open_home(home)
    try:
        with workspace.store.session() as session:
            stored = session.scalars(
                select(FeedbackRecord)
                .where(FeedbackRecord.request_id == request_id)
                .order_by(FeedbackRecord.row)
            ).all()
            assert [r.label for r in stored] == labels
            assert {r.model for r in stored} == {"adult-mlp"}
            assert {r.model_ref for r in stored} == {"adult-mlp@v1"}
            assert stored[1].features["age"] == rows[1]["age"]
            assert stored[1].features["fnlwgt"] == "[REDACTED]"  # as the request log keeps it
            predicted = answer["predictions"][1]
            assert stored[1].prediction["label"] == predicted["label"]
            assert stored[1].prediction["confidence"] == pytest.approx(
                max(predicted["probabilities"].values())
            )
    finally:
        workspace.close()
    assert _stored(home) == (before + 3, events + 1)

    relabelled = httpx.post(
        f"{first.url}{FEEDBACK}", json={"feedback": [{"id": request_id, "label": labels[::-1]}]}
    )
    assert relabelled.status_code == 200, relabelled.text
    assert _stored(home)[0] == before + 3  # labelled again: replaced, not added


def test_an_id_another_replica_answered_is_found_in_the_shared_log(
    replicas: Any, home: Path
) -> None:
    first, second, log = replicas
    request_id = _predict(first.url, adult_records(1, offset=20)).headers["x-request-id"]
    for offset in range(3):  # the first replica's memory (2 requests) forgets it too
        _predict(first.url, adult_records(1, offset=30 + offset))
    _logged(log, request_id)
    before, _ = _stored(home)

    for replica in (second, first):
        response = httpx.post(f"{replica.url}{FEEDBACK}", json={"id": request_id, "label": ">50K"})
        assert response.status_code == 200, response.text
    assert _stored(home)[0] == before + 1


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"id": "no-such-id", "label": "<=50K"}, 404, "request id 'no-such-id'"),
        (
            {"feedback": [{"id": "known", "label": "<=50K"}, {"id": "missing", "label": ">50K"}]},
            404,
            "request id 'missing'",
        ),
        ({"id": "known", "label": ["<=50K", ">50K"]}, 422, "had 1 rows but its feedback gives 2"),
        ({"id": "known", "label": None}, 422, "is null"),
        ({"label": "<=50K"}, 422, "one of the two"),
        ({"id": "known", "label": 1, "feedback": [{"id": "known", "label": 1}]}, 422, "one of"),
        ({"feedback": [{"id": "known", "label": 1}] * 2}, 422, "labelled twice"),
        ({"feedback": []}, 422, "feedback"),
        ({"id": "known", "label": 1, "extra": 1}, 422, "extra"),
    ],
)
def test_bad_feedback_is_refused_and_records_nothing(
    replicas: Any, home: Path, body: dict[str, Any], status: int, message: str
) -> None:
    first, _, _ = replicas
    _predict(first.url, adult_records(1, offset=40), **{"x-request-id": "known"})
    before = _stored(home)

    response = httpx.post(f"{first.url}{FEEDBACK}", json=body)

    assert response.status_code == status, response.text
    assert message in response.json()["error"]
    assert _stored(home) == before


def test_feedback_for_an_unknown_model_or_not_json_is_refused(replicas: Any, home: Path) -> None:
    first, _, _ = replicas
    before = _stored(home)
    unknown = httpx.post(f"{first.url}/v2/models/nosuch/feedback", json={"id": "x", "label": 1})
    assert unknown.status_code == 404 and "no model 'nosuch'" in unknown.json()["error"]
    garbled = httpx.post(
        f"{first.url}{FEEDBACK}", content=b"{", headers={"content-type": "application/json"}
    )
    assert garbled.status_code == 400 and "not valid JSON" in garbled.json()["error"]
    assert _stored(home) == before


def _process(home: Path, log: Path, *args: str, ready: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:  # the child keeps its own descriptor
        process = subprocess.Popen(
            forgeml_command(*args), env=subprocess_env(home), stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        wait_until(lambda: _up(ready, process), 120, f"{args[0]} being ready", interval=0.2)
    except BaseException:
        process.kill()
        raise
    return process


def _up(url: str, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        raise AssertionError(f"the process exited with {process.returncode}")
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.slow
def test_feedback_through_the_gateway_finds_what_any_replica_answered(
    home: Path, tmp_path: Path
) -> None:
    # two replica processes of one deployment, each keeping 1 request in memory:
    # the shared request log is what lets one label what the other answered
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    name = f"adult-{uuid.uuid4().hex[:8]}"  # a deployment of this run alone
    processes = []
    workspace = open_home(home)
    try:
        for k, url in enumerate(urls):
            port = url.rsplit(":", 1)[1]
            processes.append(
                _process(
                    home,
                    tmp_path / f"replica-{k}.log",
                    "serve",
                    "adult-mlp@v1",
                    "--name",
                    name,
                    "--port",
                    port,
                    "--log-sample-rate",
                    "1",
                    "--feedback-window",
                    "1",
                    ready=f"{url}/v2/health/ready",
                )
            )
        add_deployment(workspace, name, urls)
        _, key = create_key(workspace, "feedback", [name])
        gateway_url = f"http://127.0.0.1:{free_port()}"
        processes.append(
            _process(
                home,
                tmp_path / "gateway.log",
                "gateway",
                "--port",
                gateway_url.rsplit(":", 1)[1],
                ready=f"{gateway_url}/healthz",
            )
        )
        before, _ = _stored(home)
        with httpx.Client(
            base_url=gateway_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as client:
            ids = []
            for offset in range(6):
                body = {"instances": adult_records(1, offset=50 + offset)}
                answer = client.post(f"/v1/models/{name}:predict", json=body)
                assert answer.status_code == 200, answer.text
                ids.append(answer.headers["x-request-id"])
            log = home / "logs" / "requests" / f"{name}.jsonl"
            wait_until(
                lambda: len(predictions_in_log(log, name, set(ids))) == 6,
                30,
                "the shared log holding every request",
            )
            prefixes = {request_id.rsplit("-", 1)[0] for request_id in ids}
            assert len(prefixes) == 2  # both replicas answered (ids carry their prefix)
            for request_id in ids:
                labelled = client.post(
                    f"/v2/models/{name}/feedback", json={"id": request_id, "label": ">50K"}
                )
                assert labelled.status_code == 200, labelled.text
            unknown = client.post(f"/v2/models/{name}/feedback", json={"id": "nope", "label": 1})
            assert unknown.status_code == 404 and "'nope'" in unknown.json()["error"]
        assert _stored(home)[0] == before + 6
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(30)
        workspace.close()
