"""Job and queue routes over real HTTP: submit, list, show, cancel, retry, logs as SSE."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import httpx
import orjson
import pytest
from sqlalchemy import select

from forgeml.api import api_in_thread
from forgeml.api._limits import ApiLimits
from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from forgeml.scheduler.foreground import run_in_foreground
from tests._wait import wait_until
from tests.api.conftest import Alice

PRINT = [sys.executable, "-c", "print('hello'); print('wörld')"]


@pytest.fixture
def api(sched_workspace: Workspace) -> Iterator[httpx.Client]:
    limits = ApiLimits(max_log_streams=1)
    with (
        api_in_thread(sched_workspace, authorizer=Alice(), limits=limits) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client


def _submit(api: httpx.Client, **fields: object) -> dict:
    answer = api.post("/api/v1/jobs", json={"command": PRINT, **fields})
    assert answer.status_code == 201, answer.text
    return answer.json()


def _events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) pairs of a Server-Sent Events stream, read as a client reads them."""
    name, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield name, "\n".join(data)
            name, data = "message", []
        elif line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))


def test_a_submitted_job_is_queued_as_the_caller_and_run_and_its_log_streamed(
    api: httpx.Client, sched_workspace: Workspace
) -> None:
    job = _submit(api, name="hello", resources={"cpus": 1, "memory_gb": 0.5})
    assert (job["state"], job["owner"], job["name"]) == ("PENDING", "alice", "hello")
    shown = api.get(f"/api/v1/jobs/{job['job_id']}").json()
    same = set(job) - {"attempts", "submitted_at", "updated_at"}  # SQLite drops the zone
    assert {key: shown[key] for key in same} == {key: job[key] for key in same}
    assert set(shown) - set(job) == {"spec", "events"}
    ran = run_in_foreground(sched_workspace, job["job_id"], lambda data: None)
    assert ran.state == "SUCCEEDED"
    shown = api.get(f"/api/v1/jobs/{job['job_id'][:8]}").json()
    assert shown["state"] == "SUCCEEDED"
    assert [a["exit_code"] for a in shown["attempts"]] == [0]
    assert [e["to"] for e in shown["events"]][-1] == "SUCCEEDED"
    with api.stream("GET", f"/api/v1/jobs/{job['job_id']}/logs") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = list(_events(stream.iter_lines()))
    assert events[0] == ("log", "hello\nwörld\n")
    assert events[-1][0] == "end"
    assert orjson.loads(events[-1][1]) == {
        "job_id": job["job_id"], "state": "SUCCEEDED", "attempts": 1,
    }  # fmt: skip
    with sched_workspace.store.session() as session:
        actors = set(session.scalars(select(AuditEvent.actor)))
    assert actors == {"alice"}


def test_cancel_and_retry_answer_the_job_and_refuse_what_its_state_forbids(
    api: httpx.Client,
) -> None:
    job = _submit(api)
    cancelled = api.post(f"/api/v1/jobs/{job['job_id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "CANCELLED"
    again = api.post(f"/api/v1/jobs/{job['job_id']}/cancel")
    assert again.status_code == 409
    assert again.json()["error"].endswith("already ended CANCELLED; nothing to cancel.")
    retried = api.post(f"/api/v1/jobs/{job['job_id']}/retry")
    assert retried.status_code == 200 and retried.json()["state"] == "PENDING"
    refused = api.post(f"/api/v1/jobs/{job['job_id']}/retry")
    assert refused.status_code == 409
    assert "only FAILED or CANCELLED jobs can be retried" in refused.json()["error"]


def test_log_streams_are_capped_per_caller_and_freed_when_the_job_ends(
    api: httpx.Client,
) -> None:
    job = _submit(api)
    url = f"/api/v1/jobs/{job['job_id']}/logs"
    with api.stream("GET", url) as first:
        lines = first.iter_lines()
        assert next(lines) == f": job {job['job_id']}"
        second = api.get(url)
        assert second.status_code == 429
        assert second.json() == {
            "error": "alice already follows 1 log streams, this server's limit; close one first.",
            "code": "rate_limited",
        }
        api.post(f"/api/v1/jobs/{job['job_id']}/cancel")
        events = list(_events(lines))
    assert [name for name, _ in events] == ["end"]
    assert orjson.loads(events[0][1])["state"] == "CANCELLED"
    # the ended stream gave its slot back
    with api.stream("GET", url) as third:
        assert third.status_code == 200
        assert [name for name, _ in _events(third.iter_lines())] == ["end"]


def test_a_stream_the_client_drops_gives_its_slot_back(api: httpx.Client) -> None:
    ended = _submit(api)["job_id"]
    api.post(f"/api/v1/jobs/{ended}/cancel")
    waiting = _submit(api)["job_id"]
    with api.stream("GET", f"/api/v1/jobs/{waiting}/logs") as stream:
        lines = stream.iter_lines()  # kept: a dropped line iterator closes the response
        assert next(lines) == f": job {waiting}"
        assert api.get(f"/api/v1/jobs/{ended}/logs").status_code == 429
    # the client went away while the job still waits: the server notices and frees the slot
    wait_until(
        lambda: api.get(f"/api/v1/jobs/{ended}/logs").status_code == 200,
        what="the dropped stream's slot given back",
    )


def test_the_job_list_pages_filters_and_sorts(api: httpx.Client) -> None:
    ids = [_submit(api, name=f"j{index}")["job_id"] for index in range(5)]
    api.post(f"/api/v1/jobs/{ids[1]}/cancel")
    seen, params = [], {"limit": 2}
    while True:
        answer = api.get("/api/v1/jobs", params=params)
        seen.append([job["job_id"] for job in answer.json()])
        if "X-Next-Cursor" not in answer.headers:
            break
        params["after"] = answer.headers["X-Next-Cursor"]
    assert seen == [ids[4:2:-1], ids[2:0:-1], ids[:1]]
    pending = api.get(
        "/api/v1/jobs", params={"state": "pending", "sort": "name", "order": "asc"}
    ).json()
    assert [job["name"] for job in pending] == ["j0", "j2", "j3", "j4"]
    mine = api.get("/api/v1/jobs", params={"owner": "alice", "queue": "default"}).json()
    assert len(mine) == 5
    assert api.get("/api/v1/jobs", params={"owner": "bob"}).json() == []


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "error"),
    [
        ("post", "/api/v1/jobs", {"command": []}, 422, "body.command:"),
        ("post", "/api/v1/jobs", {"command": ["x"], "gpu": 1}, 422, "body.gpu: Extra inputs"),
        ("post", "/api/v1/jobs", {"command": ["x"], "priority": "urgent"}, 422,
         "Unknown priority class 'urgent'"),
        ("post", "/api/v1/jobs", {"command": ["x"], "queue": "nope"}, 404, "No queue named"),
        ("post", "/api/v1/jobs", {"command": ["x"], "resources": {"cpus": 64}}, 422, ""),
        ("get", "/api/v1/jobs", {"state": "sleeping"}, 422, "query.state: unknown state"),
        ("get", "/api/v1/jobs", {"limit": 1000}, 422, "query.limit:"),
        ("get", "/api/v1/jobs/nope", None, 404, "No job 'nope'"),
        ("get", "/api/v1/jobs/nope/logs", None, 404, "No job 'nope'"),
        ("post", "/api/v1/jobs/nope/cancel", None, 404, "No job 'nope'"),
        ("post", "/api/v1/jobs/nope/retry", None, 404, "No job 'nope'"),
    ],
)  # fmt: skip
def test_bad_job_requests_are_json_errors_and_change_nothing(
    api: httpx.Client, method: str, url: str, body: dict | None, status: int, error: str
) -> None:
    if method == "get":
        answer = api.get(url, params=body)
    else:
        answer = api.request(method.upper(), url, json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error"].startswith(error), answer.json()
    assert api.get("/api/v1/jobs").json() == []


def test_queues_are_created_listed_and_shown_as_the_cli_prints_them(api: httpx.Client) -> None:
    made = api.post("/api/v1/queues",
                    json={"name": "gpu", "weight": 3, "capability": {"gpus": 2}})  # fmt: skip
    assert made.status_code == 201, made.text
    assert made.json()["capability"] == {"gpus": 2}
    assert made.json()["created_by"] == "alice"
    assert api.post("/api/v1/queues", json={"name": "gpu"}).status_code == 409
    assert api.post("/api/v1/queues", json={"name": "x", "weight": 0}).status_code == 422
    assert api.post("/api/v1/queues", json={"name": "x", "cap": {}}).status_code == 422
    _submit(api, queue="gpu")
    first = api.get("/api/v1/queues", params={"limit": 1})
    assert [q["name"] for q in first.json()] == ["default"]
    rest = api.get("/api/v1/queues", params={"after": first.headers["X-Next-Cursor"]}).json()
    assert [q["name"] for q in rest] == ["gpu"]
    by_weight = api.get("/api/v1/queues", params={"sort": "weight", "order": "desc"}).json()
    assert [q["name"] for q in by_weight] == ["gpu", "default"]
    assert api.get("/api/v1/queues/gpu").json()["jobs"] == {"PENDING": 1}
    assert api.get("/api/v1/queues/nope").status_code == 404
