"""`POST /api/v1/commands/archive`: the command's files and folders as one tar, the request
body itself, streamed to disk within the upload limit (413 above it, by its declared length
or as it arrives, nothing left), and unpacked as the job's folder."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forgeml.api._limits import ApiLimits
from forgeml.core.archives import TAR_MEDIA_TYPE, pack_named
from forgeml.core.workspace import Workspace
from forgeml.scheduler.contract import JOB_CWD_ENV
from tests.api._commands import job_folders_left, job_spec
from tests.api.conftest import api_client

URL = "/api/v1/commands/archive"
TAR = {"Content-Type": TAR_MEDIA_TYPE}


def _archive(
    tmp_path: Path, files: dict[str, bytes], folders: dict[str, dict[str, bytes]]
) -> bytes:
    named: dict[str, Path] = {}
    for name, data in files.items():
        (tmp_path / "files").mkdir(exist_ok=True)
        named[name] = tmp_path / "files" / name
        named[name].write_bytes(data)
    trees = {}
    for name, tree in folders.items():
        folder = tmp_path / "folders" / name
        folder.mkdir(parents=True)
        for inner, data in tree.items():
            (folder / inner).parent.mkdir(parents=True, exist_ok=True)
            (folder / inner).write_bytes(data)
        trees[name] = (folder, sorted(Path(inner) for inner in tree))
    out = io.BytesIO()
    pack_named(named, trees, out)
    return out.getvalue()


def _tar(*members: tuple[str, bytes | None]) -> bytes:
    """A tar of `members` as given: (name, bytes), or (name, None) for a folder."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_the_archive_is_unpacked_as_the_jobs_folder(
    api_workspace: Workspace, tmp_path: Path
) -> None:
    tree = {"a.md": b"# a", "sub/b.txt": b"b", "sub/deeper/c.html": b"<p>c</p>"}
    body = _archive(tmp_path, {"q.yaml": b"x: 1"}, {"docs": tree, "empty": {}})
    argv = ["rag", "index", "notes", "docs"]
    with api_client(api_workspace) as client:
        answer = client.post(URL, params={"argv": argv}, content=body, headers=TAR)

    assert answer.status_code == 202, answer.text
    spec = job_spec(api_workspace, answer.json()["job_id"])
    folder = Path(spec["env"][JOB_CWD_ENV])
    assert spec["scratch"] == str(folder) and spec["command"][-4:] == argv
    assert sorted(p.name for p in folder.iterdir()) == ["docs", "empty", "q.yaml"]
    assert (folder / "q.yaml").read_bytes() == b"x: 1"
    unpacked = {
        p.relative_to(folder / "docs").as_posix(): p.read_bytes()
        for p in (folder / "docs").rglob("*")
        if p.is_file()
    }
    assert unpacked == tree
    assert list((folder / "empty").iterdir()) == []
    # the body's temporary file is gone: only the job's folder is left
    assert job_folders_left(api_workspace) == [folder.name]


def _chunks(data: bytes, size: int = 4096) -> Iterator[bytes]:
    # a body without a declared length (chunked): the limit is found as it arrives
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_the_upload_limit_is_a_413_and_leaves_nothing(
    api_workspace: Workspace, tmp_path: Path, declared: bool
) -> None:
    body = _archive(tmp_path, {}, {"docs": {"big.txt": bytes(64 << 10)}})
    content: Any = body if declared else _chunks(body)
    with api_client(api_workspace, ApiLimits(max_upload_bytes=32 << 10)) as client:
        answer = client.post(URL, params={"argv": ["train", "docs"]}, content=content, headers=TAR)

    assert answer.status_code == 413, answer.text
    assert answer.json()["error"] == (
        "The archive is larger than this server's limit of 32,768 bytes."
    )
    assert job_folders_left(api_workspace) == []


def test_what_an_archive_unpacks_to_is_held_to_the_member_limit(
    api_workspace: Workspace, tmp_path: Path
) -> None:
    body = _archive(tmp_path, {}, {"d": {"a": b"", "b": b"", "c": b""}})
    with api_client(api_workspace, ApiLimits(max_upload_members=3)) as client:
        answer = client.post(URL, params={"argv": ["train", "d"]}, content=body, headers=TAR)

    assert answer.status_code == 413, answer.text
    assert answer.json()["error"].startswith("archive: over this server's limit of 3 files")
    assert job_folders_left(api_workspace) == []


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"not a tar at all", 422, "The archive is not a tar archive"),
        (b"", 422, "The archive is not a tar archive"),
        (_tar(("x", b"1"), ("x/a", b"2")), 400, "The archive is refused: not a directory at 'x/a'"),
        (_tar(("x", None), ("x", b"1")), 400, "The archive is refused: is a directory at 'x'"),
        (_tar(("../up", b"1")), 400, "The archive is refused: the member '../up' would land"),
        (_tar(("d" * 300, b"1")), 400, "The archive is refused: file name too long at 'ddd"),
    ],
    ids=["not-a-tar", "empty", "file-then-folder", "folder-then-file", "outside", "long-name"],
)
def test_an_archive_that_cannot_be_the_jobs_folder_is_refused_and_leaves_nothing(
    api_workspace: Workspace, body: bytes, status: int, error: str
) -> None:
    with api_client(api_workspace) as client:
        answer = client.post(URL, params={"argv": ["train", "x"]}, content=body, headers=TAR)

    assert answer.status_code == status, answer.text
    assert answer.json()["error"].startswith(error)
    assert job_folders_left(api_workspace) == []


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["data", "list"], "argv: `forgeml data list` is not a command the server runs as a job"),
        (["train", "--server=http://x"], "argv: --server cannot be given"),
    ],
)
def test_a_command_not_run_as_a_job_is_refused_and_leaves_nothing(
    api_workspace: Workspace, argv: list[str], error: str
) -> None:
    body = _tar(("a", b"1"))
    with api_client(api_workspace) as client:
        answer = client.post(URL, params={"argv": argv}, content=body, headers=TAR)

    assert answer.status_code == 400, answer.text
    assert answer.json()["error"].startswith(error)
    assert job_folders_left(api_workspace) == []
