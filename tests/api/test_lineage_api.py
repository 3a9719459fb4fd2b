from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from forgeml.governance.lineage import lineage
from tests.cli._served import Served
from tests.governance._chain import DEPLOYMENT, MODEL
from tests.governance._served_chain import served_chain


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_chain(tmp_path_factory) as home:
        yield home


def _get(served: Served, path: str, token: str = "olivia", **params: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {served.tokens[token]}"}
    url = f"{served.url}/api/v1/lineage/{path}"
    # a first drawing imports matplotlib in the server: more than httpx's 5 s on a busy machine
    return httpx.get(url, params=params, headers=headers, timeout=60)


def test_the_answer_is_the_lineage_as_json(served: Served) -> None:
    answer = _get(served, MODEL, depth=2, direction="up")

    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    expected = lineage(served.workspace, MODEL, depth=2, direction="up").to_dict()
    assert answer.json() == expected


def test_format_svg_answers_the_drawing(served: Served) -> None:
    answer = _get(served, f"deployment:{DEPLOYMENT}", format="svg")

    assert answer.status_code == 200
    assert answer.headers["content-type"] == "image/svg+xml"
    texts = {"".join(e.itertext()) for e in ET.fromstring(answer.content).iter()}
    assert {MODEL, DEPLOYMENT, "adult@v1"} <= texts


@pytest.mark.parametrize(
    ("path", "params", "status", "error"),
    [
        ("no-such-thing", {}, 404, "No dataset version, model version, run or deployment"),
        ("adult-mlp", {}, 400, "write model:adult-mlp or run:adult-mlp"),
        (MODEL, {"depth": -1}, 422, "depth"),
        (MODEL, {"direction": "sideways"}, 422, "direction"),
        (MODEL, {"format": "png"}, 422, "format"),
        ("a:b@v1", {}, 422, "record"),
    ],
)
def test_bad_requests_are_json_errors(
    served: Served, path: str, params: dict[str, Any], status: int, error: str
) -> None:
    answer = _get(served, path, **params)

    assert answer.status_code == status, answer.text
    assert error in answer.json()["error"]


@pytest.mark.parametrize(
    ("ref", "status"),
    [
        ("adult@v4", 200),
        ("dataset:adult@v4", 200),
        ("no-such-thing", 404),  # asked datasets:read, then not found
        (MODEL, 403),
        ("run:adult-mlp", 403),
        (DEPLOYMENT, 403),
    ],
)
def test_the_permission_is_the_read_of_the_refs_kind(served: Served, ref: str, status: int) -> None:
    answer = _get(served, ref, token="datasets_only")

    assert answer.status_code == status, answer.text
    if status == 403:
        kind = {MODEL: "models", "run:adult-mlp": "runs", DEPLOYMENT: "deployments"}[ref]
        assert f"{kind}:read" in answer.json()["error"]


def test_a_viewer_reads_the_lineage_and_anonymous_callers_do_not(served: Served) -> None:
    assert _get(served, MODEL, token="victor").status_code == 200
    assert httpx.get(f"{served.url}/api/v1/lineage/{MODEL}").status_code == 401
