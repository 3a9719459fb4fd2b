"""Remote mode of the heavy commands: `forgeml --server URL train CONFIG` uploads the config,
runs `forgeml train` as a job of the server's scheduler, prints its log and exits as the
job did; the same command run locally prints and exits the same."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update

from forgeml.auth import issue_token
from forgeml.core.store import AuditEvent, Dataset, JobRecord, ModelVersionRecord, RunRecord
from forgeml.core.workspace import Workspace
from tests.auth._accounts import fast_settings, person
from tests.cli._served import (
    Forgeml,
    Served,
    assert_same_as_local,
    scheduling,
    served,
    served_on,
)
from tests.cli.conftest import assert_cli_error
from tests.train.conftest import ADULT_CONFIG, SRC, copy_adult_home, quick

# `forgeml train` of the Adult example, shortened, printing its outputs as JSON
TRAIN = ("train", "train.yaml", *quick(), "--json")


@pytest.fixture(scope="module")
def adult_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The prepared Adult workspace (examples/adult/README.md's data steps), served."""
    tmp = tmp_path_factory.mktemp("adult-served")
    copy_adult_home(tmp_path_factory, tmp / "home")
    with served(tmp) as home:
        yield home


@pytest.fixture
def forgeml(
    adult_served: Served,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[Forgeml]:
    from tests.cli._served import forgeml_on

    # the jobs are this interpreter's `python -m forgeml.cli`, importing this tree
    monkeypatch.setenv("PYTHONPATH", str(SRC))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.yaml").write_bytes(ADULT_CONFIG.read_bytes())
    with forgeml_on(adult_served, capsys, monkeypatch) as run:
        yield run


def test_a_remote_train_runs_as_a_server_job_and_prints_what_local_train_prints(
    forgeml: Forgeml,
) -> None:
    local = forgeml(*TRAIN)
    before = _audited(forgeml.served.workspace)
    with scheduling(forgeml.served):
        remote = forgeml.remote(*TRAIN)

    assert (remote.code, remote.stderr) == (local.code, local.stderr) == (0, ""), remote
    here, there = json.loads(local.stdout), json.loads(remote.stdout)
    assert set(there) == set(here)
    assert (here["model"], there["model"]) == ("adult-mlp@v1", "adult-mlp@v2")
    # the same seed on the same data: the same model, whichever machine asked for it
    scores = [
        {k: v for k, v in out["metrics"].items() if k != "confusion_matrix"}
        for out in (here, there)
    ]
    assert scores[1] == pytest.approx(scores[0], rel=1e-3)
    # the job, its run and its model recorded as the caller's
    actors = {actor for _, actor, _ in _audited(forgeml.served.workspace)[len(before) :]}
    actions = {action for _, _, action in _audited(forgeml.served.workspace)[len(before) :]}
    assert actors == {"olivia"} and {"job.submit", "model.register"} <= actions, actions
    # the job's folder (its train.yaml) removed once it ended; its log kept
    assert list((forgeml.served.home / "commands").iterdir()) == []
    job = json.loads(forgeml.remote("jobs", "list", "--json").stdout)[0]
    assert job["state"] == "SUCCEEDED" and job["command"][-len(TRAIN) :] == list(TRAIN)
    logged = forgeml.remote("jobs", "logs", job["job_id"])
    assert (logged.code, logged.stdout) == (0, remote.stdout)


def test_a_remote_train_lands_its_run_and_model_in_the_callers_project(
    forgeml: Forgeml, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    served = forgeml.served
    person(served.workspace, fast_settings(tmp_path), "tara", "developer", "team-a")
    served.tokens["tara"] = issue_token(served.workspace, "tara", "cli", actor="tester")[1]
    monkeypatch.setenv("FORGEML_PROJECT", "team-a")
    # training reads its own project's datasets only: adult (and the dataset its feature
    # spec was fitted on) move to team-a for this test
    _move_datasets(served.workspace, "team-a")
    try:
        with scheduling(served):
            remote = forgeml.remote(
                "train", "train.yaml", *quick("name=adult-team-a"), "--json", token="tara"
            )
    finally:
        _move_datasets(served.workspace, "default")

    assert (remote.code, remote.stderr) == (0, ""), remote
    assert json.loads(remote.stdout)["model"] == "adult-team-a@v1"
    with served.workspace.store.session() as session:
        model = session.scalars(
            select(ModelVersionRecord).where(ModelVersionRecord.name == "adult-team-a")
        ).one()
        run = session.get(RunRecord, model.run_id)
        job = session.scalars(select(JobRecord).where(JobRecord.owner == "tara")).one()
        assert run is not None
        assert (model.project, run.project, job.project) == ("team-a", "team-a", "team-a")
    # listed in team-a, and not in default
    in_team = json.loads(forgeml.remote("models", "list", "--json", token="tara").stdout)
    assert [m["name"] for m in in_team] == ["adult-team-a"]
    monkeypatch.delenv("FORGEML_PROJECT")
    listed = json.loads(forgeml.remote("models", "list", "--json").stdout)
    assert "adult-team-a" not in {m["name"] for m in listed}


def _move_datasets(workspace: Workspace, project: str) -> None:
    with workspace.store.session() as session:
        session.execute(update(Dataset).values(project=project))


def _audited(workspace: Workspace) -> list[tuple[int, str, str]]:
    with workspace.store.session() as session:
        return [tuple(row) for row in session.execute(  # type: ignore[misc]
            select(AuditEvent.seq, AuditEvent.actor, AuditEvent.action).order_by(AuditEvent.seq)
        )]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "code"),
    [(("train", "nosuch.yaml"), 1), (("train", "train.yaml", "--bogus"), 2)],
)
def test_a_failing_remote_command_exits_with_the_jobs_code_and_prints_its_error(
    forgeml: Forgeml, command: tuple[str, ...], code: int
) -> None:
    local = forgeml(*command)
    with scheduling(forgeml.served):
        remote = forgeml.remote(*command)

    assert local.code == remote.code == code
    assert local.stderr.strip() in remote.stdout.splitlines()
    assert_cli_error(remote, f"The job exited with code {code} (job ", code)


def test_detach_prints_the_queued_job_whose_log_is_the_commands_output(
    forgeml: Forgeml,
) -> None:
    local = forgeml("monitor", "policy", "list", "--json")
    queued = forgeml.remote("monitor", "policy", "list", "--json", "--detach")
    job = json.loads(queued.stdout)
    with scheduling(forgeml.served):
        followed = forgeml.remote("jobs", "logs", "-f", job["job_id"])

    assert queued.code == 0 and job["state"] == "PENDING" and job["owner"] == "olivia"
    assert job["command"][-4:] == ["monitor", "policy", "list", "--json"]
    assert (followed.code, followed.stdout) == (0, local.stdout)


@pytest.mark.slow
def test_a_folder_named_by_a_remote_command_is_uploaded_and_indexed_as_locally(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    from tests.rag.conftest import write_stdlib_docs

    docs = write_stdlib_docs(tmp_path / "docs", ("bisect",))
    (docs / "more").mkdir()
    (docs / "more" / "notes.md").write_text("# Notes\n\nA sorted list keeps its order.\n")
    (docs / "more" / "notes.bin").write_bytes(b"\0not read")
    local = forgeml("rag", "index", "here", str(docs), "--json")
    with scheduling(forgeml.served):
        remote = forgeml.remote("rag", "index", "there", f"{docs}/", "--json")

    # the job's log is the command's stderr (its progress line), then its stdout
    progress, _, printed = remote.stdout.partition("\n")
    assert (remote.code, remote.stderr, local.code) == (0, "", 0), remote
    assert _timeless(progress.replace("there", "here") + "\n") == _timeless(local.stderr)
    here, there = json.loads(local.stdout), json.loads(printed)
    # the same digest too: documents are named below their folder, wherever it was read
    same = (
        "version", "digest", "chunks", "documents", "config", "stats", "created", "run",
        "created_by",
    )  # fmt: skip
    assert {k: there[k] for k in same} == {k: here[k] for k in same}
    assert (here["documents"], here["created"]) == (2, True)
    # the same files, read from the folder the server unpacked them in
    unpacked = Path(there["sources"][0]["spec"])
    assert [s["kind"] for s in there["sources"]] == [s["kind"] for s in here["sources"]]
    assert unpacked.name == "docs"
    assert unpacked.parent.parent == (forgeml.served.home / "commands").resolve()
    assert not unpacked.exists()  # removed when the job ended


@pytest.mark.slow
def test_a_remote_rag_index_indexes_into_the_callers_project(
    forgeml: Forgeml, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from forgeml.core.store import RagIndexRecord

    served = forgeml.served
    person(served.workspace, fast_settings(tmp_path), "rita", "developer", "team-r")
    served.tokens["rita"] = issue_token(served.workspace, "rita", "cli", actor="tester")[1]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nbisect inserts into a sorted list.\n")
    monkeypatch.setenv("FORGEML_PROJECT", "team-r")
    with scheduling(served):
        remote = forgeml.remote("rag", "index", "docs-r", f"{docs}/", "--json", token="rita")

    assert (remote.code, remote.stderr) == (0, ""), remote
    assert json.loads(remote.stdout.partition("\n")[2])["project"] == "team-r"
    with served.workspace.store.session() as session:
        index = session.scalars(select(RagIndexRecord).where(RagIndexRecord.name == "docs-r")).one()
        job = session.scalars(select(JobRecord).where(JobRecord.owner == "rita")).one()
        assert (index.project, job.project) == ("team-r", "team-r")
    # searched in team-r, and not from default
    assert forgeml.remote("rag", "query", "docs-r", "sorted", "--json", token="rita").code == 0
    monkeypatch.delenv("FORGEML_PROJECT")
    refused = forgeml.remote("rag", "query", "docs-r", "sorted")
    assert refused.code == 1 and "'team-r'" in refused.stderr, refused


def _timeless(text: str) -> str:
    return re.sub(r"done in [0-9.]+s", "done in Ns", text)


def test_a_folder_holding_a_link_is_refused_before_anything_is_sent(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# a")
    (tmp_path / "docs" / "passwd.md").symlink_to("/etc/passwd")
    before = json.loads(forgeml.remote("jobs", "list", "--json").stdout)

    refused = forgeml.remote("rag", "index", "docs", str(tmp_path / "docs"))

    assert_cli_error(refused, "passwd.md is a link or a device", 2)
    assert json.loads(forgeml.remote("jobs", "list", "--json").stdout) == before


def test_a_viewer_cannot_run_a_command_as_a_job(forgeml: Forgeml) -> None:
    refused = forgeml.remote(*TRAIN, token="victor")

    assert_cli_error(refused, "jobs:submit", 1)


def test_a_pipeline_file_is_drawn_and_exported_here_in_remote_mode(forgeml: Forgeml) -> None:
    pipeline = str(Path(__file__).parents[2] / "examples" / "pipelines" / "adult-data.yaml")
    for command in (("pipelines", "graph", pipeline),
                    ("pipelines", "export", pipeline, "--image", "forgeml:1")):  # fmt: skip
        assert_same_as_local(forgeml(*command), forgeml.remote(*command), command)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_remote_command_prints_and_exits_as_local_on_each_backend(
    backend: str,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.cli._served import forgeml_on

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    with served_on(backend, tmp_path_factory) as home, forgeml_on(home, capsys, monkeypatch) as run:
        for command in (
            ("monitor", "policy", "list", "--json"),
            ("monitor", "policy", "show", "x"),
        ):
            local = run(*command)
            with scheduling(home):
                remote = run.remote(*command)
            assert (remote.code, remote.stdout) == (local.code, local.stdout + local.stderr)
