"""Remote mode of `forgeml data head|diff|export|query|rebuild` and the transforms: the same
output and exit code through the API as on the local workspace, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import test_remote as shared
from tests.cli.test_remote import BACKENDS, Forgeml
from tests.data.conftest import write_table_csv

# the served workspaces of tests/cli/test_remote.py, built once more for this module
forgeml = shared.forgeml
served = shared.served
sqlite_served = shared.sqlite_served
postgresql_served = shared.postgresql_served
module_postgres_url = shared.module_postgres_url

READS = [
    ("data", "head", "adult", "-n", "3"),
    ("data", "head", "adult@v4", "--split", "test", "-n", "2", "--json"),
    ("data", "diff", "adult@v1", "adult@v2"),
    ("data", "diff", "adult@v2", "adult@v3", "--json"),
    ("data", "query", 'SELECT "Y", count(*) AS n FROM adult GROUP BY 1 ORDER BY 1'),
    ("data", "query", "SELECT * FROM adult", "--limit", "2", "--json"),
    ("data", "rebuild", "adult@v2"),
    ("data", "split", "adult@v3", "--stratify", "Y"),
    ("data", "split", "adult@v3", "--stratify", "Y", "--json"),
    # the same error sentence and exit code
    ("data", "head", "nosuch"),
    ("data", "head", "adult", "-n", "-1"),
    ("data", "diff", "adult@v1", "adult@v99"),
    ("data", "query", "DROP TABLE adult"),
    ("data", "query", "SELECT 1", "--limit", "0"),
    ("data", "rebuild", "adult@v99"),
    ("data", "clean", "nosuch", "--drop-duplicates"),
    ("data", "split", "adult@v3", "--ratios", "0.5,x"),
]


@pytest.mark.slow
@BACKENDS
@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_remote_data_prints_what_local_prints(forgeml: Forgeml, command: tuple[str, ...]) -> None:
    local = forgeml(*command)
    remote = forgeml.remote(*command)

    assert (remote.code, remote.stdout) == (local.code, local.stdout)
    assert _without_timing(remote.stderr) == _without_timing(local.stderr)
    if local.code:
        assert local.stderr.startswith("error: ") and local.stderr.count("\n") == 1


def _without_timing(stderr: str) -> str:
    # the step's line ends with its duration ("rebuilding small: done in 0.12s")
    return "\n".join(line.split(": done in")[0] for line in stderr.splitlines())


@BACKENDS
def test_remote_export_writes_the_bytes_local_export_writes(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    path = tmp_path / "test-split.csv"
    local = forgeml("data", "export", "adult@v4", str(path), "--split", "test")
    written = path.read_bytes()
    path.unlink()
    remote = forgeml.remote("data", "export", "adult@v4", str(path), "--split", "test")

    assert (remote.code, remote.stdout) == (local.code, local.stdout)
    assert local.stdout.startswith("wrote ") and "of adult@v4 to" in local.stdout
    assert path.read_bytes() == written


def test_an_unknown_export_format_is_refused_before_anything_is_read(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    refused = forgeml.remote("data", "export", "adult", str(tmp_path / "out.xlsx"))

    assert refused.code == 2
    assert refused.stderr.startswith("error: Cannot export to 'out.xlsx'")
    assert not (tmp_path / "out.xlsx").exists()


@BACKENDS
def test_an_uploaded_version_rebuilds_from_the_bytes_the_server_kept(
    forgeml: Forgeml, tmp_path: Path
) -> None:
    csv = write_table_csv(tmp_path / "kept.csv")
    added = forgeml.remote("data", "add", "kept", str(csv), "--json")
    csv.unlink()  # the server never saw this path: the upload's bytes are what it rebuilds

    remote = forgeml.remote("data", "rebuild", "kept@v1")
    local = forgeml("data", "rebuild", "kept@v1")

    digest = json.loads(added.stdout)["digest"]
    assert remote.code == 0, remote.stderr
    assert remote.stdout == local.stdout == f"rebuilt kept@v1: digest {digest[:12]} matches\n"


@BACKENDS
def test_a_remote_transform_records_what_a_local_one_would(forgeml: Forgeml) -> None:
    dedup = ("data", "clean", "adult@v1", "--drop-duplicates", "--name", "adult-dedup", "--json")
    created = forgeml.remote(*dedup)
    again = forgeml(*dedup)

    summary = json.loads(created.stdout)
    assert created.code == 0, created.stderr
    assert (summary["ref"], summary["created"], summary["parents"]) == (
        "adult-dedup@v1",
        True,
        ["adult@v1"],
    )
    assert json.loads(again.stdout) == {**summary, "created": False}
    shown = forgeml("data", "show", "adult-dedup@v1", "--json")
    assert json.loads(shown.stdout)["digest"] == summary["digest"]
