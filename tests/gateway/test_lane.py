"""The forward lane answers exactly as the gateway's FastAPI routes do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from forgeml.core.workspace import Workspace
from tests._wait import wait_until
from tests.gateway.conftest import TEST_OPTIONS, GatewayUnderTest, start_gateway

INFER = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1.0]}]}
CASES: list[tuple[str, str, str | None, dict[str, Any], int]] = [
    ("v2 infer", "/v2/models/lane/infer?trace=1", "lane", {"json": INFER}, 200),
    ("v2, empty rest", "/v2/models/lane/", "lane", {"json": INFER}, 200),
    ("predict", "/v1/models/lane:predict", "lane", {"json": {"instances": [1]}}, 200),
    ("predict, colon in name", "/v1/models/la:ne:predict", "any", {"json": {}}, 404),
    ("embeddings", "/v1/embeddings", "lane", {"json": {"model": "lane", "input": "hi"}}, 200),
    ("chat", "/v1/chat/completions", "lane", {"json": {"model": "lane", "messages": []}}, 200),
    ("rag query", "/v1/rag/docs/query", "lane", {"json": {"model": "lane", "query": "q"}}, 200),
    ("rag answer", "/v1/rag/docs/answer", "lane", {"json": {"model": "lane"}}, 200),
    ("rag, no model", "/v1/rag/docs/query", "lane", {"json": {"query": "q"}}, 422),
    ("rag, no key", "/v1/rag/docs/answer", None, {"json": {"model": "lane"}}, 401),
    ("rag, scoped elsewhere", "/v1/rag/docs/query", "other", {"json": {"model": "lane"}}, 403),
    ("rag, wrong verb", "/v1/rag/docs/delete", "lane", {"json": {"model": "lane"}}, 404),
    ("rag, no index", "/v1/rag//query", "lane", {"json": {"model": "lane"}}, 404),
    ("no key", "/v2/models/lane/infer", None, {"json": INFER}, 401),
    ("no key, OpenAI", "/v1/completions", None, {"json": {"model": "lane"}}, 401),
    ("unknown key", "/v1/models/lane:predict", "fml_000000000000_nope", {"json": {}}, 401),
    ("scoped elsewhere", "/v2/models/lane/infer", "other", {"json": INFER}, 403),
    ("unknown deployment", "/v2/models/nosuch/infer", "any", {"json": INFER}, 404),
    ("not JSON, OpenAI", "/v1/embeddings", "lane", {"content": b"{not json"}, 422),
    ("no model, OpenAI", "/v1/completions", "lane", {"json": {"prompt": "hi"}}, 422),
    ("too large", "/v2/models/lane/infer", "lane", {"content": b"x" * 5000}, 413),
    ("wrong verb", "/v1/models/lane:explain", "lane", {"json": {}}, 404),
    ("no name", "/v1/models/:predict", "lane", {"json": {}}, 404),
    ("v2 metadata by POST", "/v2/models/lane", "lane", {"json": {}}, 405),
]


@pytest.fixture(scope="module")
def pair(gateway_home: Workspace) -> Iterator[tuple[GatewayUnderTest, GatewayUnderTest]]:
    """The gateway with its lane and without, over one workspace and one replica."""
    fast = start_gateway(gateway_home, TEST_OPTIONS)
    slow = start_gateway(gateway_home, TEST_OPTIONS, fast_lane=False)
    with_lane, without = next(fast), next(slow)
    replica = with_lane.upstream("r1")
    with_lane.deploy("lane", [replica.url])
    wait_until(lambda: "lane" in without.app.state.gateway.routes, what="the second gateway's load")
    yield with_lane, without
    for started in (fast, slow):
        started.close()


@pytest.mark.parametrize(
    ("case", "path", "scope", "body", "status"), CASES, ids=[c[0] for c in CASES]
)
def test_the_lane_answers_as_the_routes_do(
    pair: tuple[GatewayUnderTest, GatewayUnderTest],
    case: str,
    path: str,
    scope: str | None,
    body: dict[str, Any],
    status: int,
) -> None:
    with_lane, without = pair
    key = None
    if scope == "any":
        key = with_lane.key()
    elif scope is not None and scope.startswith("fml_"):
        key = scope
    elif scope is not None:
        key = with_lane.key([scope])
    fast, slow = with_lane.post(path, key, **body), without.post(path, key, **body)
    assert fast.status_code == slow.status_code == status, (fast.text, slow.text)
    assert fast.content == slow.content
    assert fast.headers.get("content-type") == slow.headers.get("content-type")
