"""`POST /api/v1/commands` with folders: each sent as a tar of its plain files, unpacked in
the job's folder within the upload limits (bytes and members, 413 above them); and the
job's folder removed when the job ends, however it ends, its log kept."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from forgeml.api._limits import ApiLimits
from forgeml.core.archives import pack_folder
from forgeml.core.workspace import Workspace
from forgeml.scheduler.contract import JOB_CWD_ENV
from forgeml.scheduler.foreground import run_in_foreground
from forgeml.scheduler.jobs import attempt_log
from tests.api._commands import job_folders_left, job_spec
from tests.api.conftest import api_client
from tests.train.conftest import SRC

PIPELINE = Path(__file__).parents[2] / "examples" / "pipelines" / "adult-data.yaml"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _packed(folder: Path, files: dict[str, bytes]) -> bytes:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    pack_folder(folder, folder.with_suffix(".tar"))
    return folder.with_suffix(".tar").read_bytes()


def _body(argv: list[str], folders: dict[str, bytes], **files: bytes) -> dict[str, Any]:
    return {
        "argv": argv,
        "files": {name: _b64(data) for name, data in files.items()},
        "folders": {name: _b64(blob) for name, blob in folders.items()},
    }


def test_a_folder_is_unpacked_in_the_jobs_folder_beside_its_files(
    api_workspace: Workspace, tmp_path: Path
) -> None:
    tree = {"a.md": b"# a", "sub/b.txt": b"b", "sub/deeper/c.html": b"<p>c</p>"}
    blob = _packed(tmp_path / "docs", tree)
    body = _body(["rag", "index", "notes", "docs"], {"docs": blob}, **{"q.yaml": b"x: 1"})
    with api_client(api_workspace) as client:
        answer = client.post("/api/v1/commands", json=body)

    assert answer.status_code == 202, answer.text
    spec = job_spec(api_workspace, answer.json()["job_id"])
    folder = Path(spec["env"][JOB_CWD_ENV])
    assert spec["scratch"] == str(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["docs", "q.yaml"]
    unpacked = {
        p.relative_to(folder / "docs").as_posix(): p.read_bytes()
        for p in (folder / "docs").rglob("*")
        if p.is_file()
    }
    assert unpacked == tree


@pytest.mark.parametrize(
    ("folders", "files", "status", "error"),
    [
        ({"../d": b""}, {}, 400, "folders.../d: a folder is sent by its bare name"),
        ({"a/d": b""}, {}, 400, "folders.a/d: a folder is sent by its bare name"),
        ({"d" * 256: b""}, {}, 400, "folders: a folder name is at most 255 bytes"),
        ({"d": b"x"}, {"d": b"x"}, 400, "folders.d: a file of that name is sent too"),
        ({"d": b"not a tar at all"}, {}, 422, "folders.d is not a tar archive"),
    ],
)
def test_a_folder_that_may_not_be_sent_is_refused_naming_it(
    api_workspace: Workspace,
    folders: dict[str, bytes],
    files: dict[str, bytes],
    status: int,
    error: str,
) -> None:
    with api_client(api_workspace) as client:
        answer = client.post("/api/v1/commands", json=_body(["train", "d"], folders, **files))

    assert answer.status_code == status, answer.text
    assert answer.json()["error"].startswith(error)
    assert job_folders_left(api_workspace) == []


def test_a_folder_whose_content_is_not_base64_is_a_400(api_workspace: Workspace) -> None:
    body = {"argv": ["train", "d"], "folders": {"d": "not base64!"}}
    with api_client(api_workspace) as client:
        answer = client.post("/api/v1/commands", json=body)

    assert answer.status_code == 400
    assert answer.json()["error"] == "folders.d: the content is not base64."


def _bomb(size: int) -> bytes:
    # one member of `size` zero bytes, gzip-compressed to a few kB
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("zeros.txt")
        info.size = size
        tar.addfile(info, io.BytesIO(bytes(size)))
    return gzip.compress(raw.getvalue())


@pytest.mark.parametrize(
    ("limits", "folders", "files", "error"),
    [
        # the folders unpack within what the files left: 5 + 5 bytes over 8
        (ApiLimits(max_upload_bytes=8), {"d": {"a.md": b"12345"}}, {"x.yaml": b"12345"},
         "folders: over this server's upload limit of 8 bytes."),
        (ApiLimits(max_upload_members=2), {"d": {"a": b"", "b": b"", "c": b""}}, {},
         "folders: over this server's limit of 2 files and folders in one upload."),
        # two folders count together
        (ApiLimits(max_upload_members=3), {"d": {"a": b"", "b": b""}, "e": {"c": b"", "d": b""}},
         {}, "folders: over this server's limit of 3 files and folders"),
    ],
)  # fmt: skip
def test_folders_over_the_upload_limits_are_a_413_and_leave_nothing(
    api_workspace: Workspace,
    tmp_path: Path,
    limits: ApiLimits,
    folders: dict[str, dict[str, bytes]],
    files: dict[str, bytes],
    error: str,
) -> None:
    blobs = {name: _packed(tmp_path / name, tree) for name, tree in folders.items()}
    with api_client(api_workspace, limits) as client:
        answer = client.post("/api/v1/commands", json=_body(["train", "d"], blobs, **files))

    assert answer.status_code == 413, answer.text
    assert answer.json()["error"].startswith(error)
    assert job_folders_left(api_workspace) == []


def test_a_compressed_folder_that_would_unpack_over_the_limit_is_refused_before_it_is_written(
    api_workspace: Workspace,
) -> None:
    blob = _bomb(64 << 20)
    assert len(blob) < 128 << 10  # what was sent is far under the limit
    with api_client(api_workspace, ApiLimits(max_upload_bytes=1 << 20)) as client:
        answer = client.post("/api/v1/commands", json=_body(["train", "d"], {"d": blob}))

    assert answer.status_code == 413, answer.text
    assert "upload limit of 1,048,576 bytes" in answer.json()["error"]
    assert job_folders_left(api_workspace) == []


@pytest.fixture
def jobs_here(monkeypatch: pytest.MonkeyPatch) -> None:
    # the jobs are this interpreter's `python -m forgeml.cli`, importing this tree
    monkeypatch.setenv("PYTHONPATH", str(SRC))


def _queue(workspace: Workspace, tmp_path: Path, argv: list[str]) -> tuple[str, Path]:
    blob = _packed(tmp_path / "pipes", {"adult-data.yaml": PIPELINE.read_bytes()})
    with api_client(workspace) as client:
        answer = client.post("/api/v1/commands", json=_body(argv, {"pipes": blob}))
    assert answer.status_code == 202, answer.text
    job_id = answer.json()["job_id"]
    folder = Path(job_spec(workspace, job_id)["env"][JOB_CWD_ENV])
    assert (folder / "pipes" / "adult-data.yaml").is_file()
    return job_id, folder


@pytest.mark.parametrize(
    ("argv", "state", "logged"),
    [
        # the job reads the folder it was sent, by the name the CLI rewrote its path to
        (["pipelines", "graph", "pipes/adult-data.yaml"], "SUCCEEDED", "split (data)  <- clean"),
        (["pipelines", "graph", "pipes/nosuch.yaml"], "FAILED", "nosuch.yaml"),
    ],
)
@pytest.mark.usefixtures("jobs_here")
def test_the_jobs_folder_is_removed_when_it_ends_and_its_log_is_kept(
    api_workspace: Workspace, tmp_path: Path, argv: list[str], state: str, logged: str
) -> None:
    job_id, folder = _queue(api_workspace, tmp_path, argv)

    ended = run_in_foreground(api_workspace, job_id, lambda _: None)

    assert ended.state == state
    assert not folder.exists() and job_folders_left(api_workspace) == []
    assert logged in attempt_log(api_workspace, job_id).decode()


def test_a_cancelled_jobs_folder_is_removed_and_the_job_cannot_be_retried_without_it(
    api_workspace: Workspace, tmp_path: Path
) -> None:
    job_id, folder = _queue(api_workspace, tmp_path, ["pipelines", "graph", "pipes/a.yaml"])

    with api_client(api_workspace) as client:
        cancelled = client.post(f"/api/v1/jobs/{job_id}/cancel")
        retried = client.post(f"/api/v1/jobs/{job_id}/retry")

    assert cancelled.status_code == 200, cancelled.text
    assert json.loads(cancelled.text)["state"] == "CANCELLED"
    assert not folder.exists() and job_folders_left(api_workspace) == []
    assert retried.status_code == 409
    assert retried.json()["error"] == (
        f"Job {job_id}'s files were removed when it ended; run its command again."
    )


def test_a_job_that_has_not_ended_keeps_its_folder(
    api_workspace: Workspace, tmp_path: Path
) -> None:
    from forgeml.scheduler.jobs import get_job, transition
    from forgeml.scheduler.model import JobState

    job_id, folder = _queue(api_workspace, tmp_path, ["pipelines", "graph", "pipes/a.yaml"])
    with api_workspace.store.session() as session:
        job = get_job(session, job_id)
        for moved in (JobState.SCHEDULED, JobState.RUNNING, JobState.PREEMPTED, JobState.PENDING):
            transition(session, job, moved, reason="test")
    kept = folder.is_dir()
    # a final state rolled back keeps the files too: the job did not end
    with pytest.raises(RuntimeError), api_workspace.store.session() as session:
        transition(session, get_job(session, job_id), JobState.FAILED, reason="test")
        raise RuntimeError("rolled back")

    assert kept and folder.is_dir()
