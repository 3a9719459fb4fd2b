"""`POST /api/v1/commands`: a CLI command queued as a job in a folder holding its files,
owned and audited as the caller; refused with 400/403/413 and a JSON error naming the
field when it may not run."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from forgeml.api._limits import ApiLimits
from forgeml.core.store import AuditEvent, JobRecord
from forgeml.core.workspace import Workspace
from forgeml.scheduler.contract import JOB_CWD_ENV, runs_cli
from tests.api._accounts_app import accounts_client, seed
from tests.api.conftest import Alice, api_client

CONFIG = b"name: adult-mlp\n"


def _body(argv: list[str], files: dict[str, bytes] | None = None) -> dict[str, Any]:
    encoded = {name: base64.b64encode(data).decode() for name, data in (files or {}).items()}
    return {"argv": argv, "files": encoded}


def test_a_command_is_queued_as_the_callers_job_in_a_folder_holding_its_files(
    api_workspace: Workspace,
) -> None:
    argv = ["train", "train.yaml", "--set", "epochs=1"]
    with api_client(api_workspace) as client:
        answer = client.post("/api/v1/commands", json=_body(argv, {"train.yaml": CONFIG}))
    assert answer.status_code == 202, answer.text
    summary = answer.json()

    with api_workspace.store.session() as session:
        job = session.get(JobRecord, summary["job_id"])
        assert job is not None
        spec, owner = job.spec, job.owner
        audited = session.scalars(
            select(AuditEvent).where(AuditEvent.object_ref == f"job:{job.id}")
        ).all()
    folder = Path(spec["env"][JOB_CWD_ENV])
    assert summary["state"] == "PENDING" and summary["owner"] == owner == "alice"
    assert spec["command"] == [sys.executable, "-m", "forgeml.cli", *argv]
    assert runs_cli(spec["command"])
    assert folder.parent == api_workspace.settings.home.resolve() / "commands"
    assert sorted(path.name for path in folder.iterdir()) == ["train.yaml"]
    assert (folder / "train.yaml").read_bytes() == CONFIG
    assert [(event.action, event.actor) for event in audited] == [("job.submit", "alice")]


@pytest.mark.parametrize(
    ("argv", "permission"),
    [
        (["train", "x.yaml"], "jobs:submit"),
        (["rag", "index", "docs", "a.md"], "rag:write"),
        (["deploy", "adult-mlp@v1", "--name", "web"], "deployments:write"),
        (["deploy", "check", "web"], "deployments:read"),
        (["pipelines", "run", "p.yaml"], "pipelines:run"),
        (["monitor", "policy", "list"], "deployments:write"),
    ],
)
def test_each_command_asks_its_own_permission_besides_jobs_submit(
    api_workspace: Workspace, argv: list[str], permission: str
) -> None:
    authorizer = Alice()
    from fastapi.testclient import TestClient

    from forgeml.api import create_app

    app = create_app(api_workspace, authorizer)
    with TestClient(app, base_url="http://localhost") as client:
        answer = client.post("/api/v1/commands", json=_body(argv))

    assert answer.status_code == 202, answer.text
    assert authorizer.asked == ["jobs:submit", permission]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (_body(["queues", "create", "gpu"]), "argv: `forgeml queues create` is not a command"),
        (_body(["nosuch"]), "argv: `forgeml nosuch` is not a command"),
        (_body(["train", "x.yaml", "--server", "http://elsewhere"]), "argv: --server"),
        (_body(["train", "x.yaml", "--token=fml_x"]), "argv: --token"),
        (_body(["data", "crawl", "web", "http://10.0.0.1/", "--allow-private"]), "argv: --allow"),
        (_body(["train", "x.yaml"], {"../x.yaml": CONFIG}), "files.../x.yaml: a file is sent"),
        (_body(["train", "x.yaml"], {"a/x.yaml": CONFIG}), "files.a/x.yaml: a file is sent"),
        (_body(["train", "x.yaml"], {"..": CONFIG}), "files..."),
        (_body(["train", "x.yaml"], {"x" * 256: CONFIG}), "files: a file name is at most 255"),
        (_body(["train", "x\0.yaml"]), "argv: an argument may not hold a NUL"),
        ('{"argv": ["train", "x\\ud800.yaml"]}', "argv: not valid Unicode text"),
        ('{"argv": ["train"], "files": {"\\ud800": ""}}', "files: not valid Unicode text"),
        ({"argv": ["train", "x.yaml"], "files": {"x.yaml": "not base64!"}}, "files.x.yaml: the"),
    ],
)
def test_a_command_that_may_not_run_is_a_400_naming_the_field(
    api_workspace: Workspace, body: dict[str, Any] | str, field: str
) -> None:
    # a str is sent as it is: JSON text no encoder would write (a lone surrogate)
    sent: dict[str, Any] = (
        {"content": body, "headers": {"Content-Type": "application/json"}}
        if isinstance(body, str)
        else {"json": body}
    )
    with api_client(api_workspace) as client:
        answer = client.post("/api/v1/commands", **sent)

    assert answer.status_code == 400, answer.text
    assert answer.json()["error"].startswith(field)
    assert not (api_workspace.settings.home / "commands").exists()


def test_a_body_with_an_unknown_field_is_refused(api_workspace: Workspace) -> None:
    with api_client(api_workspace) as client:
        answer = client.post("/api/v1/commands", json=_body(["train", "x.yaml"]) | {"cwd": "/"})

    assert answer.status_code == 422
    assert answer.json()["error"].startswith("body.cwd")


def test_files_over_the_upload_limit_are_a_413(api_workspace: Workspace) -> None:
    with api_client(api_workspace, ApiLimits(max_upload_bytes=8)) as client:
        answer = client.post(
            "/api/v1/commands", json=_body(["train", "x.yaml"], {"x.yaml": b"x" * 9})
        )

    assert answer.status_code == 413
    assert "upload limit of 8 bytes" in answer.json()["error"]


def test_a_viewer_cannot_run_a_command_and_a_developer_cannot_deploy(
    api_workspace: Workspace, tmp_path: Path
) -> None:
    client, settings, _ = accounts_client(api_workspace, tmp_path)
    people = {"victor": ("viewer", "default"), "dora": ("developer", "default")}
    tokens = seed(api_workspace, settings, people)

    def post(who: str, argv: list[str]) -> Any:
        headers = {"Authorization": f"Bearer {tokens[who]}"}
        return client.post("/api/v1/commands", json=_body(argv), headers=headers)

    with client:
        viewer = post("victor", ["train", "x.yaml"])
        deploy = post("dora", ["deploy", "create", "adult-mlp@v1", "--name", "web"])
        train = post("dora", ["train", "x.yaml"])

    assert viewer.status_code == 403 and "jobs:submit" in viewer.json()["error"]
    assert deploy.status_code == 403 and "deployments:write" in deploy.json()["error"]
    assert train.status_code == 202, train.text
