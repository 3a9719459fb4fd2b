"""The fast lane answers `:predict` and v2 `infer` exactly as the FastAPI routes do."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.types import Message, Receive, Scope, Send

from forgeml.serve import ModelRepository, ServeOptions, build_app
from forgeml.serve.lane import FastLane
from tests.serve.conftest import adult_records, open_home

GOOD = adult_records(2)
TENSORS = [
    {
        "name": name,
        "shape": [2],
        "datatype": "BYTES" if isinstance(value, str) else "INT64",
        "data": [record[name] for record in GOOD],
    }
    for name, value in GOOD[0].items()
]
PREDICT, V2 = "/v1/models/adult-mlp:predict", "/v2/models/adult-mlp/infer"
CASES = [
    ("predict", PREDICT, {"instances": GOOD}),
    ("v2", V2, {"id": "7", "inputs": TENSORS, "outputs": [{"name": "label"}]}),
    ("v2 default outputs", V2, {"inputs": TENSORS}),
    ("not JSON", PREDICT, b"{instances"),
    ("not JSON, v2", V2, b'{"inputs": ['),
    ("not an object", PREDICT, [1, 2]),
    ("no instances", PREDICT, {"instances": []}),
    ("wrong dtype", PREDICT, {"instances": [{**GOOD[0], "age": "old"}]}),
    ("extra feature", PREDICT, {"instances": [{**GOOD[0], "height": 180}]}),
    ("unknown model", "/v1/models/nosuch:predict", {"instances": GOOD}),
    ("unknown model, v2", "/v2/models/nosuch/infer", {"inputs": TENSORS}),
    ("wrong shape", V2, {"inputs": [{**t, "shape": [3]} for t in TENSORS]}),
    ("unknown output", V2, {"inputs": TENSORS, "outputs": [{"name": "nope"}]}),
    ("too large", PREDICT, {"instances": GOOD * 400}),
]


@pytest.fixture(scope="module")
def repository(served_home: Path) -> Iterator[ModelRepository]:
    workspace = open_home(served_home)
    loaded = ModelRepository(workspace, ["adult-mlp@v1"], ServeOptions(max_body_bytes=64 * 1024))
    loaded.load()
    yield loaded
    loaded.close()
    workspace.close()


def _post(app: Any, path: str, body: Any, content_type: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            headers = {"content-type": content_type}
            return await client.post(path, content=content, headers=headers)

    return asyncio.run(ask())


@pytest.mark.parametrize(("case", "path", "body"), CASES, ids=[c[0] for c in CASES])
def test_the_lane_answers_as_the_routes_do(
    repository: ModelRepository, case: str, path: str, body: Any
) -> None:
    lane, routes = build_app(repository), build_app(repository, fast_lane=False)
    fast = _post(lane, path, body, "application/json")
    slow = _post(routes, path, body, "application/json")
    assert fast.status_code == slow.status_code
    if case == "not an object":  # pydantic words it differently validating JSON directly
        assert fast.json()["error"].startswith("Invalid request at 'body': Input should be ")
    else:
        assert fast.json() == slow.json()
    assert fast.headers["content-type"] == slow.headers["content-type"] == "application/json"
    if not case.startswith(("predict", "v2")):
        assert fast.status_code in (400, 404, 413, 422), fast.text


class _Behind:
    """The app behind the lane: records what reached it and answers 299."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.paths.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@pytest.mark.parametrize(
    ("method", "path", "content_type", "in_lane"),
    [
        ("POST", PREDICT, "application/json", True),
        ("POST", PREDICT, "application/json; charset=utf-8", True),
        ("POST", V2, "Application/JSON", True),
        ("POST", "/v1/models/a:b:predict", "application/json", True),
        ("POST", PREDICT, "text/plain", False),
        ("POST", PREDICT, "application/vnd.api+json", False),
        ("GET", PREDICT, "application/json", False),
        ("POST", "/v1/models/:predict", "application/json", False),
        ("POST", "/v2/models/a/b/infer", "application/json", False),
        ("POST", "/v2/models/adult-mlp/ready", "application/json", False),
        ("POST", "/v1/embeddings", "application/json", False),
    ],
)
def test_only_json_posts_to_the_inference_routes_take_the_lane(
    repository: ModelRepository, method: str, path: str, content_type: str, in_lane: bool
) -> None:
    behind = _Behind()
    lane = FastLane(behind, repository, None)

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=lane)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            headers = {"content-type": content_type}
            body = orjson.dumps({"instances": GOOD})
            return await client.request(method, path, content=body, headers=headers)

    response = asyncio.run(ask())
    assert (behind.paths == []) is in_lane
    assert (response.status_code != 299) is in_lane


def test_a_client_gone_before_its_body_arrived_gets_no_answer(
    repository: ModelRepository,
) -> None:
    sent: list[Message] = []
    scope = {
        "type": "http",
        "method": "POST",
        "path": PREDICT,
        "headers": [(b"content-type", b"application/json")],
    }

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(FastLane(_Behind(), repository, None)(scope, receive, send))
    assert sent == []


def test_a_body_streamed_past_the_limit_gets_a_413_from_the_lane(
    repository: ModelRepository,
) -> None:
    """No Content-Length: the body limit trips while the lane reads the body."""
    chunk = b" " * (40 * 1024)  # three of these pass the 64 KiB limit
    messages = [{"type": "http.request", "body": chunk, "more_body": True}] * 3
    sent: list[Message] = []
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": PREDICT,
        "raw_path": PREDICT.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"serve"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }

    async def receive() -> Message:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(build_app(repository)(scope, receive, send))
    assert sent[0]["status"] == 413
    assert "over this server's limit" in orjson.loads(sent[1]["body"])["error"]


def test_a_bug_in_the_lane_gets_a_logged_500_in_the_protocol_s_json(
    repository: ModelRepository,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(name: str) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(repository, "get", broken)
    response = _post(build_app(repository), PREDICT, {"instances": GOOD}, "application/json")
    assert response.status_code == 500
    assert response.json() == {"error": "Internal server error; see the server log."}
    assert "a bug" in caplog.text
