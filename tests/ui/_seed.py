"""A workspace for the UI tests: the trained Adult runs and models, a dataset whose cells
hold an XSS payload (two versions), jobs (one ran, two waiting), two firing alerts, a
gateway key, a deployment with a canary, a request log of adult-mlp (whose later rows are
older people: drift in `age`), and three accounts."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import polars as pl
import pytest

from forgeml.auth import AuthSettings
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.auth._accounts import PASSWORD, fast_settings, person
from tests.gateway.conftest import add_deployment
from tests.train.conftest import copy_home, trained_adult_template

XSS = "<img src=x onerror=alert(1)>"
ROLES = {"ada": "admin", "mia": "maintainer", "vic": "viewer"}
# the request log: CALM rows of the test split as they are, then SHIFTED with age + 15
CALM, SHIFTED, LOGGED_AT = 900, 600, 1_800_000_000.0
# feedback on adult-mlp: LABELLED predictions of the test split, in windows of
# FEEDBACK_WINDOW; window j (oldest first) holds j wrong ones (predicted the other class)
LABELLED, FEEDBACK_WINDOW = 40, 10
WRONG = sum(k % FEEDBACK_WINDOW < k // FEEDBACK_WINDOW for k in range(LABELLED))
__all__ = [
    "FEEDBACK_WINDOW", "LABELLED", "PASSWORD", "ROLES", "WRONG", "XSS", "label_adult_predictions",
    "log_adult_requests", "seeded_home",
]  # fmt: skip


def seeded_home(factory: pytest.TempPathFactory, root: Path) -> tuple[Workspace, AuthSettings]:
    """The seeded workspace under `root` (the caller closes it) and its accounts' settings."""
    from forgeml.data.ingest import IngestOptions
    from forgeml.data.pipeline import add
    from forgeml.gateway import create_key
    from forgeml.scheduler.submit import submit_and_run

    home = copy_home(trained_adult_template(factory), root / "home")
    workspace = Workspace(Settings(home=home, user="tester"))
    for version, rows in enumerate(([("ann", 31)], [("ann", 31), ("bob", 45)]), start=1):
        csv = root / f"notes{version}.csv"
        lines = ["name,age,note", *(f'{n},{a},"{XSS}"' for n, a in rows)]
        csv.write_text("\n".join(lines) + "\n")
        add(workspace, "notes", csv, IngestOptions())
    command = [sys.executable, "-c", "print('hello from the job')"]
    submit_and_run(workspace, {"command": command, "name": "hello"}, detach=False, wait=True,
                   output=lambda _: None)  # fmt: skip
    for name in ("waiting-one", "waiting-two"):
        submit_and_run(workspace, {"command": ["true"], "name": name}, detach=True, wait=False)
    _fire_alerts(workspace)
    log_adult_requests(workspace)
    label_adult_predictions(workspace)
    replicas = [f"http://127.0.0.1:{port}" for port in (9101, 9102, 9103)]
    add_deployment(workspace, "adult-api", replicas[:2], canary=replicas[2:], weight=20)
    create_key(workspace, "web-app", None, 5.0, None, 10_000)
    settings = fast_settings(root)
    for name, role in ROLES.items():
        person(workspace, settings, name, role)
    return workspace, settings


def _fire_alerts(workspace: Workspace) -> None:
    """Two alerts as Alertmanager's webhook sends them (firing, one a model each)."""
    from forgeml.monitor.alerts import parse_message, receive

    alerts = [
        {
            "status": "firing",
            "labels": {"alertname": "ForgemlQueueBacklog", "model": model, "severity": "warning"},
            "annotations": {"summary": f"Model {model} queues."},
            "startsAt": "2026-12-03T10:00:00Z",
            "fingerprint": f"f-{model}",
        }
        for model in ("adult-mlp", "adult-small")
    ]
    message = {"version": "4", "status": "firing", "receiver": "r", "alerts": alerts}
    receive(workspace, parse_message(message))


def log_adult_requests(workspace: Workspace, served: str = "adult-mlp") -> None:
    """The request log of adult-mlp@v1 served as `served`, as its server writes it
    (`forgeml.serve.request_log`): 50 rows a request, one request a second, from the test
    split of its training data."""
    from forgeml.data import catalog
    from forgeml.monitor.drift import request_log_path
    from forgeml.tracking import get_model_version

    dataset = get_model_version(workspace, "adult-mlp@v1").dataset_version
    assert dataset is not None
    frame = catalog.read_frame(workspace, dataset, "test").drop("Y", "__split__")
    calm = frame.head(CALM)
    shifted = frame.slice(CALM, SHIFTED).with_columns(pl.col("age") + 15)
    rows = pl.concat([calm, shifted]).to_dicts()
    log = request_log_path(workspace, served)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        for k, start in enumerate(range(0, len(rows), 50)):
            entry = {
                "ts": LOGGED_AT + k, "id": f"r{k}", "model": served,
                "version": "adult-mlp@v1", "protocol": "v1", "instances": rows[start : start + 50],
            }  # fmt: skip
            out.write(orjson.dumps(entry) + b"\n")


def label_adult_predictions(workspace: Workspace) -> None:
    """Feedback on `LABELLED` predictions of adult-mlp@v1, as `forgeml monitor feedback`
    records it: each the row's true label, its prediction wrong in window j's first j rows
    (windows of `FEEDBACK_WINDOW`, oldest first: accuracy 1, 0.9, 0.8, 0.7)."""
    from forgeml.data import catalog
    from forgeml.serve.feedback import FeedbackRow, record_feedback
    from forgeml.tracking import get_model_version

    dataset = get_model_version(workspace, "adult-mlp@v1").dataset_version
    assert dataset is not None
    frame = catalog.read_frame(workspace, dataset, "test").head(LABELLED)
    classes = sorted(set(catalog.read_frame(workspace, dataset, "test")["Y"].cast(str)))
    rows = []
    for k, row in enumerate(frame.drop("__split__").to_dicts()):
        label = str(row.pop("Y"))
        other = next(c for c in classes if c != label)
        predicted = other if k % FEEDBACK_WINDOW < k // FEEDBACK_WINDOW else label
        rows.append(FeedbackRow(
            request_id=f"f{k}", row=0, model="adult-mlp", model_ref="adult-mlp@v1",
            predicted_at=LOGGED_AT + k, features=row,
            prediction={"label": predicted, "confidence": 0.8}, label=label,
        ))  # fmt: skip
    record_feedback(workspace, rows, "tests")
