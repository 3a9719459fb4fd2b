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
COLUMNS = {name: [record[name] for record in GOOD] for name in GOOD[0]}
TEXTS = ["a gorgeous, witty, seductive movie.", "the plot is nothing but boilerplate clichés"]
TEXT_TENSOR = {"name": "text", "shape": [2], "datatype": "BYTES", "data": TEXTS}
PREDICT, V2 = "/v1/models/adult-mlp:predict", "/v2/models/adult-mlp/infer"
TEXT_PREDICT, TEXT_V2 = "/v1/models/sst2-minilm:predict", "/v2/models/sst2-minilm/infer"
CASES = [
    ("predict", PREDICT, {"instances": GOOD}),
    ("predict columns", PREDICT, {"inputs": COLUMNS, "signature_name": "serving_default"}),
    ("predict text objects", TEXT_PREDICT, {"instances": [{"text": t} for t in TEXTS]}),
    ("predict text columns", TEXT_PREDICT, {"inputs": {"text": TEXTS}}),
    ("predict text list", TEXT_PREDICT, {"inputs": TEXTS}),
    ("v2", V2, {"id": "7", "inputs": TENSORS, "outputs": [{"name": "label"}]}),
    ("v2 default outputs", V2, {"inputs": TENSORS}),
    ("v2 text default outputs", TEXT_V2, {"inputs": [TEXT_TENSOR]}),
    ("both formats", PREDICT, {"instances": GOOD, "inputs": COLUMNS}),
    ("neither format", PREDICT, {"signature_name": "serving_default"}),
    ("ragged columns", PREDICT, {"inputs": {**COLUMNS, "age": [30]}}),
    ("scalar column", PREDICT, {"inputs": {**COLUMNS, "age": 30}}),
    ("unnamed columns", PREDICT, {"inputs": GOOD}),
    ("text object of another field", TEXT_PREDICT, {"instances": [{"review": TEXTS[0]}]}),
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
WORDED_APART = {"not an object", "scalar column"}


@pytest.fixture(scope="module")
def repository(served_home: Path) -> Iterator[ModelRepository]:
    workspace = open_home(served_home)
    refs = ["adult-mlp@v1", "sst2-minilm@v1"]
    loaded = ModelRepository(workspace, refs, ServeOptions(max_body_bytes=64 * 1024))
    loaded.load()
    yield loaded
    loaded.close()
    workspace.close()


def _post(app: Any, path: str, body: Any, content_type: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)

    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            # one caller id for both paths, or the v2 answers' minted ids would differ
            headers = {"content-type": content_type, "x-request-id": "lane-1"}
            return await client.post(path, content=content, headers=headers)

    return asyncio.run(ask())


def _get(app: Any, path: str) -> httpx.Response:
    async def ask() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            return await client.get(path)

    return asyncio.run(ask())


@pytest.mark.parametrize(("case", "path", "body"), CASES, ids=[c[0] for c in CASES])
def test_the_lane_answers_as_the_routes_do(
    repository: ModelRepository, case: str, path: str, body: Any
) -> None:
    lane, routes = build_app(repository), build_app(repository, fast_lane=False)
    fast = _post(lane, path, body, "application/json")
    slow = _post(routes, path, body, "application/json")
    assert fast.status_code == slow.status_code
    if case in WORDED_APART:  # pydantic words a type error otherwise validating JSON directly
        fast_at, slow_at = (r.json()["error"].partition(" Input should be ") for r in (fast, slow))
        assert fast_at[:2] == slow_at[:2] and fast_at[1]
    else:
        assert fast.json() == slow.json()
    assert fast.headers["content-type"] == slow.headers["content-type"] == "application/json"
    # every answer carries the request id, but for a body refused by size before it is read
    assert fast.headers.get("x-request-id") == slow.headers.get("x-request-id")
    assert fast.status_code == 413 or fast.headers["x-request-id"] in ("lane-1", "7")
    if not case.startswith(("predict", "v2")):
        assert fast.status_code in (400, 404, 413, 422), fast.text


@pytest.mark.parametrize(
    ("model", "inputs"), [("adult-mlp", TENSORS), ("sst2-minilm", [TEXT_TENSOR])]
)
def test_the_lane_answers_every_output_the_metadata_lists_when_none_is_named(
    repository: ModelRepository, model: str, inputs: list[dict[str, Any]]
) -> None:
    app = build_app(repository)
    listed = [output["name"] for output in _get(app, f"/v2/models/{model}").json()["outputs"]]
    answer = _post(app, f"/v2/models/{model}/infer", {"inputs": inputs}, "application/json")
    assert [output["name"] for output in answer.json()["outputs"]] == listed


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain"])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        (PREDICT, {"instances": GOOD}),
        (TEXT_PREDICT, {"instances": TEXTS}),
        (V2, {"inputs": TENSORS}),
    ],
)
def test_an_inference_body_is_read_as_json_whatever_its_content_type(
    repository: ModelRepository, path: str, body: Any, content_type: str
) -> None:
    for fast_lane in (True, False):
        app = build_app(repository, fast_lane=fast_lane)
        declared = _post(app, path, body, "application/json")
        undeclared = _post(app, path, body, content_type)
        assert undeclared.status_code == declared.status_code == 200, undeclared.text
        assert undeclared.json() == declared.json()


@pytest.mark.parametrize("path", [PREDICT, V2])
def test_a_body_that_is_not_json_gets_a_400_whatever_its_content_type(
    repository: ModelRepository, path: str
) -> None:
    for fast_lane in (True, False):
        app = build_app(repository, fast_lane=fast_lane)
        answer = _post(app, path, b"instances=1", "application/x-www-form-urlencoded")
        assert answer.status_code == 400
        assert answer.json() == {"error": "The request body is not valid JSON."}


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
