"""What remote mode sends with a command run as a job: the files and folders the command line
names, packed as one tar into a temporary file (never whole in memory) and read back by the
server as the job's folder; one over the server's upload limit is one sentence."""

from __future__ import annotations

import os
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from forgeml.api._limits import ApiLimits
from forgeml.cli._remote_jobs import pack, uploads
from forgeml.core.archives import extract_tar
from forgeml.core.errors import UsageError
from tests.cli._served import forgeml_on, served
from tests.cli.conftest import assert_cli_error

MIB = 1 << 20


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_folder_of_20_mib_is_packed_into_a_file_not_into_memory(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    for number in range(4):
        (docs / "sub" / f"part{number}.bin").write_bytes(os.urandom(5 * MIB))
    (docs / "a.md").write_text("# a\n")
    argv, named = uploads(["rag", "index", "notes", str(docs)])

    tracemalloc.start()
    try:
        with pack(named) as archive:
            _, peak = tracemalloc.get_traced_memory()
            size = os.fstat(archive.fileno()).st_size
            (tmp_path / "sent.tar").write_bytes(archive.read())
    finally:
        tracemalloc.stop()

    assert argv == ["rag", "index", "notes", "docs"]
    # the 20 MiB are in the file, and a small part of them at most was ever in memory
    assert 20 * MIB < size == (tmp_path / "sent.tar").stat().st_size < 21 * MIB
    assert peak < MIB, f"packing held {peak:,} bytes in memory"
    job = extract_tar(tmp_path / "sent.tar", tmp_path / "job", "archive", "plain files")
    assert _tree(job / "docs") == _tree(docs)


def test_files_and_folders_are_sent_by_their_bare_names_as_the_jobs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "docs" / "empty").mkdir(parents=True)
    (tmp_path / "docs" / "a.md").write_text("# a\n")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "q.yaml").write_text("x: 1\n")
    monkeypatch.chdir(tmp_path)
    argv, named = uploads(["train", "conf/q.yaml", "--data=docs/", "--seed", "3"])

    with pack(named) as archive, tarfile.open(fileobj=archive) as tar:
        members = [(m.name, m.isdir()) for m in tar.getmembers()]

    assert argv == ["train", "q.yaml", "--data=docs", "--seed", "3"]
    assert members == [("q.yaml", False), ("docs", True), ("docs/a.md", False)]


def test_two_files_of_one_name_are_sent_once_when_equal_and_refused_when_not(
    tmp_path: Path,
) -> None:
    for folder, text in (("a", "same"), ("b", "same"), ("c", "other")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "q.yaml").write_text(text)
    paths = [str(tmp_path / folder / "q.yaml") for folder in "abc"]

    argv, named = uploads(["train", paths[0], paths[1]])
    with pytest.raises(UsageError, match=r"Two different paths are named q\.yaml"):
        uploads(["train", paths[0], paths[2]])

    assert argv == ["train", "q.yaml", "q.yaml"] and list(named.files) == ["q.yaml"]


def test_a_folder_over_the_servers_upload_limit_is_one_sentence_and_leaves_nothing_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "big.md").write_bytes(b"# big\n" + bytes(2 * MIB))
    limits = ApiLimits(max_upload_bytes=MIB)
    with (
        served(tmp_path / "server", limits=limits) as home,
        forgeml_on(home, capsys, monkeypatch) as forgeml,
    ):
        # the real CLI, through a real uvicorn: the tar is streamed from its file
        refused = forgeml.remote("rag", "index", "up", str(docs), "--detach")
        scratch = home.home / "commands"
        left = sorted(p.name for p in scratch.iterdir()) if scratch.exists() else []

    assert_cli_error(refused, "The archive is larger than this server's limit of 1,048,576 bytes.")
    assert refused.stderr == (
        "error: The archive is larger than this server's limit of 1,048,576 bytes.\n"
    )
    assert left == []
