"""Dataset routes: paged lists, show, and uploads (size limit, actor, same JSON as the CLI)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from forgeml.api._limits import ApiLimits
from forgeml.core.config import Settings
from forgeml.core.store import AuditEvent, DatasetVersion
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from tests.api.conftest import api_client

NAMES = ["adult-a", "adult-b", "adult-c", "adult-d", "adult-e", "sst2"]


def _adult_slice(adult: Path, rows: int) -> bytes:
    with open(adult, "rb") as handle:
        return b"".join(handle.readline() for _ in range(rows + 1))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Iterator[TestClient]:
    """Five Adult slices (20..60 rows) and SST-2's dev set, uploaded once; adult-a twice."""
    home = tmp_path_factory.mktemp("datasets") / "home"
    workspace = Workspace(Settings(home=home, user="tester"))
    adult = shared_data / "adult" / "adult.data"
    with api_client(workspace) as client:
        for index, name in enumerate(NAMES[:5]):
            body = _adult_slice(adult, 20 + 10 * index)
            answer = client.post(
                f"/api/v1/datasets/{name}/versions", params={"filename": "adult.csv"}, content=body
            )
            assert answer.status_code == 201, answer.text
        more = _adult_slice(adult, 70)
        client.post("/api/v1/datasets/adult-a/versions", params={"filename": "a.csv"}, content=more)
        dev = (shared_data / "sst2" / "dev.tsv").read_bytes()
        client.post("/api/v1/datasets/sst2/versions", params={"filename": "dev.tsv"}, content=dev)
        yield client
    workspace.close()


def _walk(client: TestClient, url: str, **params: object) -> list[list[dict]]:
    pages = []
    while True:
        answer = client.get(url, params=params)
        assert answer.status_code == 200, answer.text
        pages.append(answer.json())
        cursor = answer.headers.get("X-Next-Cursor")
        if cursor is None:
            assert "Link" not in answer.headers
            return pages
        assert answer.headers["Link"].endswith('rel="next"')
        params = {**params, "after": cursor}


def test_the_list_pages_by_keyset_without_skipping_or_repeating(seeded: TestClient) -> None:
    pages = _walk(seeded, "/api/v1/datasets", limit=4)
    assert [len(page) for page in pages] == [4, 2]
    assert [item["dataset"] for page in pages for item in page] == NAMES
    latest = {item["dataset"]: item["version"] for page in pages for item in page}
    assert latest["adult-a"] == 2


def test_the_list_sorts_and_filters_on_the_server(seeded: TestClient) -> None:
    by_rows = [i["dataset"] for p in _walk(seeded, "/api/v1/datasets", sort="rows", limit=2)
               for i in p]  # fmt: skip
    assert by_rows == ["adult-b", "adult-c", "adult-d", "adult-e", "adult-a", "sst2"]
    desc = _walk(seeded, "/api/v1/datasets", sort="rows", order="desc", limit=5)
    assert [i["rows"] for p in desc for i in p] == [872, 70, 60, 50, 40, 30]
    only = seeded.get("/api/v1/datasets", params={"prefix": "adult-", "sort": "name"}).json()
    assert [i["dataset"] for i in only] == NAMES[:5]
    assert seeded.get("/api/v1/datasets", params={"created_by": "nobody"}).json() == []


def test_versions_page_and_show_answers_what_the_cli_prints(
    seeded: TestClient, tmp_path: Path
) -> None:
    pages = _walk(seeded, "/api/v1/datasets/adult-a/versions", limit=1)
    assert [[i["ref"] for i in p] for p in pages] == [["adult-a@v1"], ["adult-a@v2"]]
    shown = seeded.get("/api/v1/datasets/adult-a@v1").json()
    assert shown["rows"] == 20
    assert shown["children"] == []
    assert shown["recipe"]["params"]["source"] == "upload:adult.csv"
    assert shown["profile"]["rows"] == 20
    assert shown["created_by"] == "alice"
    assert set(shown) >= {"schema", "report", "parents", "digest"}


def test_an_upload_is_audited_as_the_caller_and_identical_content_is_no_new_version(
    api_workspace: Workspace, shared_data: Path
) -> None:
    body = (shared_data / "sst2" / "dev.tsv").read_bytes()
    with api_client(api_workspace) as client:
        first = client.post("/api/v1/datasets/dev/versions", params={"filename": "dev.tsv"},
                            content=body)  # fmt: skip
        again = client.post("/api/v1/datasets/dev/versions", params={"filename": "d.tsv"},
                            content=body)  # fmt: skip
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["created"] is True and again.json()["created"] is False
    assert first.json()["ref"] == again.json()["ref"] == "dev@v1"
    assert first.json()["report"]["format"] == "tsv"
    with api_workspace.store.session() as session:
        (event,) = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "data.version.create")
        ).all()
        assert (event.actor, event.object_ref) == ("alice", "dev@v1")
        assert catalog.resolve(session, "dev").created_by == "alice"


def test_an_upload_over_the_limit_is_413_and_records_nothing(
    api_workspace: Workspace, shared_data: Path
) -> None:
    body = (shared_data / "sst2" / "dev.tsv").read_bytes()
    limits = ApiLimits(max_upload_bytes=len(body) - 1)
    with api_client(api_workspace, limits) as client:
        declared = client.post("/api/v1/datasets/dev/versions", params={"filename": "dev.tsv"},
                               content=body)  # fmt: skip
        # no Content-Length: the limit is counted on the stream itself
        streamed = client.post("/api/v1/datasets/dev/versions", params={"filename": "dev.tsv"},
                               content=iter([body[:50_000], body[50_000:]]))  # fmt: skip
        fits = client.post("/api/v1/datasets/dev/versions", params={"filename": "dev.tsv"},
                           content=body[: len(body) // 2].rsplit(b"\n", 1)[0])  # fmt: skip
    for answer in (declared, streamed):
        assert answer.status_code == 413
        assert answer.json() == {
            "error": f"The upload is larger than this server's limit of {len(body) - 1:,} bytes.",
            "code": "payload_too_large",
        }
    assert fits.status_code == 201
    with api_workspace.store.session() as session:
        assert len(session.scalars(select(DatasetVersion)).all()) == 1


@pytest.mark.parametrize(
    ("params", "body", "status", "error"),
    [
        ({"filename": "x.csv"}, b"", 422, "'x.csv' has no rows: the file is empty."),
        ({"filename": "../x.csv"}, b"a,b\n1,2\n", 422, "query.filename: String should match"),
        ({"filename": "x.csv", "format": "images"}, b"a\n1\n", 422, "query.format: Input should"),
        ({"filename": "x.csv", "on_bad_rows": "maybe"}, b"a\n1\n", 422, "query.on_bad_rows:"),
        ({"filename": "x.csv", "names": "a,a"}, b"1,2\n", 422, "query: key 'names'"),
        ({"filename": "x.csv", "label": "nope"}, b"a,b\n1,2\n", 422, "The label"),
    ],
)
def test_a_bad_upload_is_one_sentence_and_records_nothing(
    api_workspace: Workspace, params: dict, body: bytes, status: int, error: str
) -> None:
    with api_client(api_workspace) as client:
        answer = client.post("/api/v1/datasets/bad/versions", params=params, content=body)
        assert answer.status_code == status, answer.text
        assert answer.json()["error"].startswith(error), answer.json()
        assert "forgeml-upload" not in answer.json()["error"]
        assert client.get("/api/v1/datasets").json() == []


@pytest.mark.parametrize(
    ("url", "params", "status", "error"),
    [
        ("/api/v1/datasets", {"limit": 501}, 422, "query.limit: Input should be less than"),
        ("/api/v1/datasets", {"limit": 0}, 422, "query.limit:"),
        ("/api/v1/datasets", {"sort": "digest"}, 422, "query.sort:"),
        ("/api/v1/datasets", {"after": "!!"}, 422, "query.after: not a cursor"),
        ("/api/v1/datasets/nope", {}, 404, "Dataset 'nope' does not exist"),
        ("/api/v1/datasets/nope/versions", {}, 404, "Dataset 'nope' does not exist"),
        ("/api/v1/datasets/adult-a@v9", {}, 404, "Dataset 'adult-a' has no version v9"),
    ],
)
def test_bad_list_and_show_requests_are_json_errors(
    seeded: TestClient, url: str, params: dict, status: int, error: str
) -> None:
    answer = seeded.get(url, params=params)
    assert answer.status_code == status
    assert answer.json()["error"].startswith(error), answer.json()


def test_a_cursor_made_under_another_sort_is_refused(seeded: TestClient) -> None:
    first = seeded.get("/api/v1/datasets", params={"limit": 2})
    cursor = first.headers["X-Next-Cursor"]
    answer = seeded.get("/api/v1/datasets", params={"limit": 2, "after": cursor, "sort": "rows"})
    assert answer.status_code == 422
    assert "sort=name order=asc" in answer.json()["error"]


def test_pages_by_creation_time_on_each_backend(any_workspace: Workspace) -> None:
    with api_client(any_workspace) as client:
        for index in range(5):
            body = f"x,y\n{index},1\n{index},2\n".encode()
            answer = client.post(f"/api/v1/datasets/d{4 - index}/versions",
                                 params={"filename": "d.csv"}, content=body)  # fmt: skip
            assert answer.status_code == 201, answer.text
        for order, expected in (("asc", ["d4", "d3", "d2", "d1", "d0"]),
                                ("desc", ["d0", "d1", "d2", "d3", "d4"])):  # fmt: skip
            pages = _walk(client, "/api/v1/datasets", sort="created_at", order=order, limit=2)
            assert [len(page) for page in pages] == [2, 2, 1]
            assert [item["dataset"] for page in pages for item in page] == expected
