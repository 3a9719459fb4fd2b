"""Remote mode of `forgeml models export` (the server builds the edge bundle, the CLI
unpacks its tar here) and `forgeml jobs export` (the server renders the Volcano manifest,
the CLI writes it here): the same output, files and errors as the local commands."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from forgeml.core.archives import pack_folder, unpack_folder
from forgeml.core.errors import AlreadyExistsError, InvalidDataError
from tests.cli import test_remote as shared
from tests.cli._served import assert_same_as_local
from tests.cli.conftest import assert_cli_error
from tests.cli.test_remote import BACKENDS, Forgeml

# the served workspaces of tests/cli/test_remote.py (a trained adult-mlp), built for this module
forgeml = shared.forgeml
served = shared.served
sqlite_served = shared.sqlite_served
postgresql_served = shared.postgresql_served
module_postgres_url = shared.module_postgres_url


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def _unwrapped(printed: str, folder: Path) -> str:
    """`printed` without its whitespace and with `folder` as FOLDER: the terminal may wrap a
    long path anywhere (a temporary folder's length depends on the test's worker)."""
    return "".join(printed.split()).replace(str(folder), "FOLDER")


@BACKENDS
def test_a_bundle_exported_remotely_holds_the_bytes_local_export_writes(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    here, there = tmp_path / "here" / "bundle", tmp_path / "away" / "bundle"
    command = ("models", "export", "adult-mlp@production", "--precision", "fp32")

    local = forgeml(*command[:3], str(here), *command[3:])
    remote = forgeml.remote(*command[:3], str(there), *command[3:])

    assert local.code == 0, local.stderr
    assert (remote.code, remote.stderr) == (0, "")
    assert _unwrapped(remote.stdout, there) == _unwrapped(local.stdout, here)
    assert local.stdout.startswith("adult-mlp@v1 -> ")
    files = _files(here)
    assert set(files) >= {"model.onnx", "features.json", "manifest.json", "runner.py", "README.md"}
    assert _files(there) == files


def test_the_json_of_a_remote_export_is_the_local_one_with_this_machines_folder(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    here, there = tmp_path / "local", tmp_path / "remote"

    local = json.loads(forgeml("models", "export", "adult-mlp@v1", str(here), "--json").stdout)
    remote = json.loads(
        forgeml.remote("models", "export", "adult-mlp@v1", str(there), "--json").stdout
    )

    assert list(remote) == list(local)
    assert (local["folder"], remote["folder"]) == (str(here), str(there))
    # the latency figures are measured on each side; the rest is the model's
    for payload in (local, remote):
        del payload["folder"], payload["p50_ms_batch_1"]
    assert remote == local
    assert local["card"] == "README.md" and local["agreement_rows"] > 0
    assert json.loads((there / "manifest.json").read_text())["files"] == remote["files"]


def test_the_server_keeps_nothing_of_a_bundle_it_built_or_failed_to_build(
    forgeml: Forgeml, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    import httpx

    scratch = tmp_path / "server-tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # the in-process server's too
    served = forgeml.served
    login = {"Authorization": f"Bearer {served.tokens['olivia']}"}

    exported = forgeml.remote("models", "export", "adult-mlp", str(tmp_path / "b"))
    missing = httpx.get(f"{served.url}/api/v1/models/adult-mlp/versions/9/export", headers=login)

    assert exported.code == 0, exported.stderr
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ("models", "export", "nosuch@v1", "{tmp}/out"),
        ("models", "export", "adult-mlp@v9", "{tmp}/out"),
        ("models", "export", "adult-mlp", "{tmp}/full"),
        ("models", "export", "adult-mlp", "{tmp}/out", "--precision", "int4"),
        ("models", "export", "adult-mlp", "{tmp}/out", "--target", "phone"),
        ("jobs", "export", "nosuch"),
        ("jobs", "export", "{job}", "--format", "argo"),
    ],
    ids=" ".join,
)
def test_a_refused_export_fails_remotely_as_it_does_locally(
    forgeml: Forgeml, tmp_path: Path, command: tuple[str, ...]
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "kept.txt").write_text("mine")
    args = [arg.format(tmp=tmp_path, job=forgeml.served.job_id) for arg in command]

    local = forgeml(*args)
    remote = forgeml.remote(*args)

    assert local.code in (1, 2)
    assert_same_as_local(local, remote, command)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["full"]  # no staging folder left behind
    assert (tmp_path / "full" / "kept.txt").read_text() == "mine"


def test_a_viewer_may_export_a_model_and_a_job(forgeml: Forgeml, tmp_path: Path) -> None:
    exported = forgeml.remote(
        "models", "export", "adult-mlp@v1", str(tmp_path / "b"), "--precision", "fp32",
        token="victor",
    )  # fmt: skip
    manifest = forgeml.remote("jobs", "export", forgeml.served.job_id, token="victor")

    assert exported.code == 0, exported.stderr
    assert (tmp_path / "b" / "README.md").is_file()
    assert manifest.code == 0 and "kind: Job" in manifest.stdout


@pytest.mark.parametrize(
    "command",
    [("models", "export", "adult-mlp@v1", "{tmp}/out"), ("jobs", "export", "{job}")],
    ids=" ".join,
)
def test_an_anonymous_caller_is_refused_an_export(
    forgeml: Forgeml, tmp_path: Path, command: tuple[str, ...]
) -> None:
    args = [arg.format(tmp=tmp_path, job=forgeml.served.job_id) for arg in command]

    refused = forgeml.remote(*args, token=None)

    assert_cli_error(refused, "refused the token", 1)
    assert not (tmp_path / "out").exists()


@BACKENDS
@pytest.mark.parametrize(
    "options",
    [(), ("--image", "registry.example/forgeml:2", "--namespace", "ml")],
    ids=["defaults", "image and namespace"],
)
def test_a_job_manifest_exported_remotely_is_the_local_one(
    forgeml: Forgeml, tmp_path: Path, options: tuple[str, ...]
) -> None:
    job = forgeml.served.job_id
    here, there = tmp_path / "local.yaml", tmp_path / "remote.yaml"

    printed = (forgeml("jobs", "export", job, *options),
               forgeml.remote("jobs", "export", job, *options))  # fmt: skip
    written = (forgeml("jobs", "export", job, *options, "-o", str(here)),
               forgeml.remote("jobs", "export", job, *options, "--output", str(there)))  # fmt: skip

    assert_same_as_local(*printed)
    assert_same_as_local(*written)
    assert printed[0].code == 0 and "batch.volcano.sh/v1alpha1" in printed[0].stdout
    assert there.read_text() == here.read_text() == printed[0].stdout
    assert ("namespace: ml" in here.read_text()) == bool(options)


def test_submitting_a_manifest_is_refused_in_remote_mode(forgeml: Forgeml) -> None:
    refused = forgeml.remote("jobs", "export", forgeml.served.job_id, "--submit")

    assert_cli_error(refused, "--submit cannot run in remote mode", 2)
    assert "kubeconfig" in refused.stderr and not refused.stdout


def _tar_with(member: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        ok = tarfile.TarInfo("manifest.json")
        ok.size = 2
        tar.addfile(ok, io.BytesIO(b"{}"))
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def _symlink(name: str, target: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = tarfile.SYMTYPE, target
    return member


def _hardlink(name: str, target: str) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname = tarfile.LNKTYPE, target
    return member


@pytest.mark.parametrize(
    ("member", "why"),
    [
        (tarfile.TarInfo("../x"), "would land outside the folder"),
        (tarfile.TarInfo("sub/../../x"), "would land outside the folder"),
        (tarfile.TarInfo("/tmp/forgeml-cve-2007-4559"), "would land outside the folder"),
        (_symlink("runner.py", "/etc/passwd"), "holds the link 'runner.py'"),
        (_symlink("inside", "manifest.json"), "holds the link 'inside'"),
        (_hardlink("hard", "manifest.json"), "holds the link 'hard'"),
    ],
    ids=["dot-dot", "nested dot-dot", "absolute", "symlink out", "symlink in", "hard link"],
)
def test_cve_2007_4559_tarfile_traversal_is_refused_by_the_unpacker(
    tmp_path: Path, member: tarfile.TarInfo, why: str
) -> None:
    blob = tmp_path / "crafted.tar"
    blob.write_bytes(_tar_with(member, b"planted"))
    dest = tmp_path / "deep" / "bundle"

    with pytest.raises(InvalidDataError, match=why):
        unpack_folder(blob, dest, "the edge bundle of m@v1")

    assert not dest.exists() and list((tmp_path / "deep").iterdir()) == []
    assert not (tmp_path / "deep" / "x").exists() and not (tmp_path / "x").exists()
    assert not Path("/tmp/forgeml-cve-2007-4559").exists()


def test_an_archive_that_is_not_a_tar_is_refused(tmp_path: Path) -> None:
    blob = tmp_path / "junk.tar"
    blob.write_bytes(b"<html>not a tar</html>")

    with pytest.raises(InvalidDataError, match="is not a tar archive"):
        unpack_folder(blob, tmp_path / "bundle", "the edge bundle of m@v1")
    assert [p.name for p in tmp_path.iterdir()] == ["junk.tar"]


def test_a_packed_folder_unpacks_to_the_same_files_and_never_over_a_full_one(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / "a.json").write_bytes(b'{"a": 1}')
    (source / "sub" / "b.bin").write_bytes(bytes(range(256)))
    pack_folder(source, tmp_path / "one.tar")
    pack_folder(source, tmp_path / "two.tar")
    (tmp_path / "empty").mkdir()

    unpack_folder(tmp_path / "one.tar", tmp_path / "empty", "a folder")

    assert (tmp_path / "one.tar").read_bytes() == (tmp_path / "two.tar").read_bytes()
    assert (tmp_path / "empty" / "a.json").read_bytes() == b'{"a": 1}'
    assert (tmp_path / "empty" / "sub" / "b.bin").read_bytes() == bytes(range(256))
    with pytest.raises(AlreadyExistsError, match="is not an empty folder"):
        unpack_folder(tmp_path / "one.tar", tmp_path / "empty", "a folder")
