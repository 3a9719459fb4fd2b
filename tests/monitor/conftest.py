"""A real model server over the Adult MLP whose requests are logged, with helpers to send
rows of the held-out test split through it and label them by request id."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from sqlalchemy import func, select

from forgeml.core.config import get_settings
from forgeml.core.store import AuditEvent, FeedbackRecord
from forgeml.serve import ServeOptions
from forgeml.serve.feedback import predictions_in_log
from tests._wait import wait_until
from tests.serve.conftest import LiveServer, open_home
from tests.train.conftest import copy_home, trained_adult_template

CHUNK = 50


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    template = trained_adult_template(tmp_path_factory)
    return copy_home(template, tmp_path_factory.mktemp("monitor") / "home")


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[LiveServer]:
    workspace = open_home(home)
    live = LiveServer(workspace, ["adult-mlp@v1"], ServeOptions(log_sample_rate=1.0)).start()
    yield live
    live.stop()
    workspace.close()


@pytest.fixture(scope="module")
def test_split(home: Path) -> pl.DataFrame:
    from forgeml.data import catalog
    from forgeml.tracking import get_model_version

    workspace = open_home(home)
    try:
        version = get_model_version(workspace, "adult-mlp@v1").dataset_version
        assert version is not None
        return catalog.read_frame(workspace, version, "test").drop("__split__")
    finally:
        workspace.close()


@pytest.fixture
def at_home(home: Path, cli: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("FORGEML_HOME", str(home))
    get_settings.cache_clear()
    return cli


def send(url: str, frame: pl.DataFrame, prefix: str) -> list[tuple[str, list[Any]]]:
    """Send `frame` without its label in requests of CHUNK rows; each id and its labels."""
    sent = []
    with httpx.Client(timeout=60) as client:
        for start in range(0, frame.height, CHUNK):
            part = frame.slice(start, CHUNK)
            request_id = f"{prefix}-{start}"
            response = client.post(
                f"{url}/v1/models/adult-mlp:predict",
                json={"instances": part.drop("Y").to_dicts()},
                headers={"x-request-id": request_id},
            )
            assert response.status_code == 200, response.text
            sent.append((request_id, part["Y"].to_list()))
    return sent


def label(url: str, sent: list[tuple[str, list[Any]]]) -> None:
    feedback = [{"id": request_id, "label": labels} for request_id, labels in sent]
    response = httpx.post(
        f"{url}/v2/models/adult-mlp/feedback", json={"feedback": feedback}, timeout=60
    )
    assert response.status_code == 200, response.text
    assert response.json()["recorded"] == sum(len(labels) for _, labels in sent)


def wait_logged(home: Path, request_id: str) -> None:
    log = home / "logs" / "requests" / "adult-mlp.jsonl"
    wait_until(
        lambda: request_id in predictions_in_log(log, "adult-mlp", {request_id}),
        30,
        f"the request log holding {request_id}",
    )


def stored(home: Path) -> tuple[int, int]:
    workspace = open_home(home)
    try:
        with workspace.store.session() as session:
            rows = session.scalar(select(func.count()).select_from(FeedbackRecord)) or 0
            events = session.scalar(select(func.count()).select_from(AuditEvent)) or 0
    finally:
        workspace.close()
    return rows, events
