"""Model-card routes over the carded Adult workspace (tests/governance): the card as
`models card --json` prints it, and notes set as the caller, audited."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from forgeml.core.store import AuditEvent
from forgeml.core.workspace import Workspace
from tests.api.conftest import api_client, copied_workspace
from tests.cli.conftest import json_out
from tests.conftest import CliResult
from tests.governance.conftest import CARD_MODEL, carded_template

CARD = "/api/v1/models/adult-mlp/versions/1/card"


@pytest.fixture
def workspace(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Workspace]:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with copied_workspace(carded_template(tmp_path_factory), tmp_path / "home") as workspace:
        yield workspace


@pytest.fixture
def api(workspace: Workspace) -> Iterator[TestClient]:
    with api_client(workspace) as client:
        yield client


@pytest.mark.parametrize("card_format", ["md", "html"])
def test_the_card_is_what_the_cli_prints(
    api: TestClient, cli: Callable[..., CliResult], card_format: str
) -> None:
    answer = api.get(CARD, params={"format": card_format})

    assert answer.status_code == 200
    printed = json_out(cli("models", "card", CARD_MODEL, "--format", card_format, "--json"))
    assert answer.json() | {"output": None} == printed


def test_notes_are_set_as_the_caller_and_audited(api: TestClient, workspace: Workspace) -> None:
    answer = api.put(CARD, json={"intended_use": "Census research <b>only</b>."})

    assert answer.status_code == 200
    assert answer.json() == {"ref": CARD_MODEL, "intended_use": "Census research <b>only</b>.",
                             "limitations": None}  # fmt: skip
    page = api.get(CARD, params={"format": "html"}).json()["card"]
    assert "Census research &lt;b&gt;only&lt;/b&gt;." in page
    with workspace.store.session() as session:
        event = session.scalars(select(AuditEvent).where(AuditEvent.action == "model.card")).one()
    assert (event.actor, event.object_ref) == ("alice", CARD_MODEL)


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "sentence"),
    [
        ("GET", "/api/v1/models/nosuch/versions/1/card", None, 404, "is not registered"),
        ("GET", "/api/v1/models/adult-mlp/versions/9/card", None, 404, "has no version v9"),
        ("PUT", CARD, {"limitations": ""}, 400, "The limitations text is empty."),
        ("PUT", CARD, {"intended_use": "x" * 5001}, 400, "the most a model version keeps"),
    ],
)
def test_errors_are_json_sentences(
    api: TestClient, method: str, url: str, body: object, status: int, sentence: str
) -> None:
    answer = api.request(method, url, json=body)

    assert answer.status_code == status
    assert sentence in answer.json()["error"]


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("GET", CARD + "?format=pdf", None),
        ("GET", "/api/v1/models/adult-mlp/versions/0/card", None),
        ("PUT", CARD, {"intended_use": "x", "owner": "me"}),
    ],
)
def test_malformed_requests_are_422(api: TestClient, method: str, url: str, body: object) -> None:
    assert api.request(method, url, json=body).status_code == 422
