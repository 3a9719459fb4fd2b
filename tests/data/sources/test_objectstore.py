from __future__ import annotations

import gzip
import io
from collections.abc import Callable, Iterator

import polars as pl
import pytest

from forgeml.core.workspace import Workspace
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult
from tests.data.conftest import snapshot_store

Cli = Callable[..., CliResult]
CSV = b"id,label\n1,a\n2,b\n3,a\n"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A real S3 API (moto's server) on loopback, with bucket `lake` holding every format."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    client.create_bucket(Bucket="lake")
    parquet = io.BytesIO()
    pl.DataFrame({"x": [1, 2], "y": ["u", "v"]}).write_parquet(parquet)
    objects = {
        "raw/reviews.csv": CSV,
        "raw/reviews.csv.gz": gzip.compress(CSV),
        "raw/events.jsonl": b'{"e": 1}\n{"e": 2}\n',
        "raw/table.parquet": parquet.getvalue(),
        "texts/pos/a.txt": b"good",
        "texts/neg/b.txt": b"bad",
    }
    for key, body in objects.items():
        client.put_object(Bucket="lake", Key=key, Body=body)
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    # how a user points s3fs at another endpoint: fsspec's FSSPEC_<PROTOCOL>_<KWARG>
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    import fsspec.config

    fsspec.config.conf.clear()
    fsspec.config.set_conf_env(fsspec.config.conf)
    yield s3_endpoint
    fsspec.config.conf.clear()


@pytest.mark.parametrize(
    ("key", "rows", "fmt"),
    [
        ("raw/reviews.csv", 3, "csv"),
        ("raw/reviews.csv.gz", 3, "csv"),
        ("raw/events.jsonl", 2, "jsonl"),
        ("raw/table.parquet", 2, "parquet"),
        ("texts/", 2, "text"),
    ],
)
def test_every_format_reads_from_s3_and_rebuilds_by_reading_it_again(
    cli: Cli, s3_env: str, key: str, rows: int, fmt: str
) -> None:
    url = f"s3://lake/{key}"

    added = json_out(cli("data", "add", "lake", url, "--json"))

    assert (added["rows"], added["report"]["format"]) == (rows, fmt)
    params = json_out(cli("data", "show", "lake", "--json"))["recipe"]["params"]
    assert params["source"] == url and params["live"] is False and "raw" not in params
    assert_ok(cli("data", "rebuild", "lake"))


def test_a_changed_object_fails_the_rebuild(cli: Cli, s3_env: str) -> None:
    import boto3

    client = boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1")
    client.put_object(Bucket="lake", Key="moving.csv", Body=CSV)
    assert_ok(cli("data", "add", "moving", "s3://lake/moving.csv"))
    client.put_object(Bucket="lake", Key="moving.csv", Body=CSV + b"4,b\n")

    assert_cli_error(cli("data", "rebuild", "moving"), "changed since it was read")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://no-such-bucket/x.csv", "does not exist; check the bucket and key"),
        ("s3://lake/raw/missing.csv", "does not exist; check the bucket and key"),
    ],
)
def test_a_missing_bucket_or_key_fails_in_one_sentence(
    cli: Cli, s3_env: str, home_workspace: Workspace, url: str, expected: str
) -> None:
    before = snapshot_store(home_workspace)

    assert_cli_error(cli("data", "add", "x", url), expected)
    assert snapshot_store(home_workspace) == before


def test_database_flags_do_not_apply_to_an_object(cli: Cli, s3_env: str) -> None:
    result = cli("data", "add", "x", "s3://lake/raw/reviews.csv", "--table", "t")

    assert_cli_error(result, "--table does not apply to object store sources", code=2)
