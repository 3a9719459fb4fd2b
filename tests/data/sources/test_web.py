from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from forgeml.core.errors import SourceError, UnsafeUrlError
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, fetching, pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.data.sources import SourceOptions
from forgeml.data.sources.web import WebSource
from tests.cli.conftest import assert_cli_error, json_out
from tests.conftest import CliResult
from tests.data.conftest import snapshot_store
from tests.data.sources.conftest import Site

Cli = Callable[..., CliResult]
CSV = "id,label,text\n1,pos,good\n2,neg,bad\n3,pos,fine\n"
LOOPBACK = ("127.0.0.1/32",)


def rows(workspace: Workspace, ref: str) -> list[dict[str, object]]:
    with workspace.store.session() as session:
        version = catalog.resolve(session, ref)
    return catalog.read_frame(workspace, version).to_dicts()


def test_a_csv_url_becomes_a_version_that_rebuilds_from_its_kept_bytes(
    cli: Cli, site: Site, home_workspace: Workspace
) -> None:
    site.page("/files/reviews.csv", CSV, "text/csv")

    added = json_out(
        cli("data", "add", "reviews", site.url("/files/reviews.csv"), "--allow-private", "--json")
    )

    assert added["rows"] == 3
    shown = json_out(cli("data", "show", "reviews", "--json"))
    params = shown["recipe"]["params"]
    assert params["source"] == site.url("/files/reviews.csv")
    assert params["source_kind"] == "web" and params["live"] is True
    assert home_workspace.artifacts.exists(params["raw"]["digest"])
    site.routes.clear()  # the page is gone: the rebuild reads the kept bytes
    assert cli("data", "rebuild", "reviews@v1").code == 0
    assert rows(home_workspace, "reviews")[1] == {"id": 2, "label": "neg", "text": "bad"}


def test_a_paginated_api_is_followed_by_its_next_link(cli: Cli, site: Site) -> None:
    site.page(
        "/api/items",
        json.dumps(
            {"data": {"items": [{"n": 1}, {"n": 2}]}, "links": {"next": "/api/items?page=2"}}
        ),
        "application/json",
    )
    site.page(
        "/api/items?page=2",
        json.dumps({"data": {"items": [{"n": 3}]}, "links": {"next": None}}),
        "application/json",
    )

    added = json_out(
        cli(
            "data",
            "add",
            "items",
            site.url("/api/items"),
            "--json-path",
            "data.items",
            "--next",
            "links.next",
            "--allow-private",
            "--json",
        )
    )

    assert added["rows"] == 3
    fetched = json_out(cli("data", "show", "items", "--json"))["recipe"]["params"]["fetched"]
    assert fetched["pages"] == 2 and fetched["records"] == 3
    assert cli("data", "rebuild", "items").code == 0


def test_a_cursor_api_sends_each_cursor_back(workspace: Workspace, site: Site) -> None:
    site.page(
        "/feed", json.dumps({"rows": [{"k": "a"}], "meta": {"after": "c1"}}), "application/json"
    )
    site.page(
        "/feed?after=c1",
        json.dumps({"rows": [{"k": "b"}], "meta": {"after": ""}}),
        "application/json",
    )
    options = SourceOptions(json_path="rows", cursor="after=meta.after")

    recorded = fetching.add_from_url(
        workspace,
        "feed",
        site.url("/feed"),
        IngestOptions(),
        options,
        source=WebSource(allow_networks=LOOPBACK),
    )

    assert [r["k"] for r in rows(workspace, recorded.version.ref)] == ["a", "b"]
    assert site.hits == ["/feed", "/feed?after=c1"]


def test_a_busy_server_is_retried_with_back_off(workspace: Workspace, site: Site) -> None:
    site.page("/flaky.csv", CSV, "text/csv")
    site.failures["/flaky.csv"] = 2
    slept: list[float] = []
    source = WebSource(sleep=slept.append, allow_networks=LOOPBACK)

    recorded = fetching.add_from_url(
        workspace, "flaky", site.url("/flaky.csv"), IngestOptions(), SourceOptions(), source=source
    )

    assert recorded.version.rows == 3
    assert slept == [0.0, 0.0]  # the server's Retry-After: 0
    assert site.hits == ["/flaky.csv"] * 3


@pytest.mark.parametrize(
    ("path", "flags", "expected"),
    [
        ("/missing.csv", ["--allow-private"], "answered 404 Not Found"),
        ("/big.csv", ["--allow-private", "--max-bytes", "20"], "over the size limit of 20 bytes"),
        ("/big.csv", [], "resolves to the non-public address 127.0.0.1"),
        (
            "/api/wrong",
            ["--allow-private", "--json-path", "data"],
            "has no list of records at 'data'",
        ),
    ],
)
def test_a_bad_web_source_fails_in_one_sentence_and_records_nothing(
    cli: Cli, site: Site, home_workspace: Workspace, path: str, flags: list[str], expected: str
) -> None:
    site.page("/big.csv", CSV, "text/csv")
    site.page("/api/wrong", json.dumps({"data": {"not": "a list"}}), "application/json")
    before = snapshot_store(home_workspace)

    assert_cli_error(cli("data", "add", "bad", site.url(path), *flags), expected)
    assert snapshot_store(home_workspace) == before


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/latest/meta-data/",
        "http://2130706434:{port}/secret",  # 127.0.0.2 written as one decimal number
        "http://[::ffff:127.0.0.2]:{port}/secret",
        "http://0x7f.0.0.2:{port}/secret",
    ],
)
def test_cve_2023_43654_a_redirect_to_a_private_address_is_refused(
    workspace: Workspace, site: Site, target: str
) -> None:
    # TorchServe's model URL followed redirects to the metadata service and loopback: every
    # hop is checked again; only the test server's own address is allowed here
    port = site.base.rsplit(":", 1)[1]
    site.redirect("/model.csv", target.format(port=port))

    with pytest.raises(UnsafeUrlError, match="non-public address"):
        fetching.add_from_url(
            workspace,
            "ssrf",
            site.url("/model.csv"),
            IngestOptions(),
            SourceOptions(),
            source=WebSource(allow_networks=LOOPBACK),
        )
    with workspace.store.session() as session:
        assert catalog.list_datasets(session) == []


def test_too_many_pages_is_an_error_not_a_silent_cut(workspace: Workspace, site: Site) -> None:
    site.page("/loop", json.dumps({"items": [{"n": 1}], "next": "/loop?x=1"}), "application/json")
    site.page(
        "/loop?x=1", json.dumps({"items": [{"n": 2}], "next": "/loop?x=2"}), "application/json"
    )

    with pytest.raises(SourceError, match="more than 1 pages"):
        fetching.add_from_url(
            workspace,
            "loop",
            site.url("/loop"),
            IngestOptions(),
            SourceOptions(json_path="items", next="next", max_pages=1),
            source=WebSource(allow_networks=LOOPBACK),
        )


def test_rebuild_notices_kept_bytes_that_no_longer_match(
    workspace: Workspace, site: Site, tmp_path: Path
) -> None:
    site.page("/r.csv", CSV, "text/csv")
    recorded = fetching.add_from_url(
        workspace,
        "r",
        site.url("/r.csv"),
        IngestOptions(),
        SourceOptions(),
        source=WebSource(allow_networks=LOOPBACK),
    )
    assert pipeline.rebuild(workspace, recorded.version.ref).actual == recorded.version.digest
    frame = pl.read_parquet(catalog.parquet_path(workspace, recorded.version))
    assert frame.height == 3


def test_a_token_in_the_url_is_used_but_never_recorded_or_printed(
    cli: Cli, site: Site, home_workspace: Workspace
) -> None:
    site.page("/private.csv", CSV, "text/csv")

    added = cli("data", "add", "p", site.url("/private.csv?api_key=tok-123&v=2"), "--allow-private")
    missing = cli("data", "add", "p", site.url("/gone.csv?token=tok-123"), "--allow-private")
    shown = json_out(cli("data", "show", "p", "--json"))

    assert site.hits[0] == "/private.csv?api_key=tok-123&v=2"
    assert shown["recipe"]["params"]["source"] == site.url("/private.csv?api_key=***&v=2")
    assert_cli_error(missing, "gone.csv?token=*** answered 404")
    for result in (added, missing):
        assert "tok-123" not in result.stdout + result.stderr
    assert "tok-123" not in str(snapshot_store(home_workspace).tables)


def test_a_server_that_does_not_answer_times_out(workspace: Workspace, site: Site) -> None:
    site.page("/slow.csv", CSV, "text/csv")
    site.stalled.add("/slow.csv")

    with pytest.raises(SourceError, match=r"GET .*/slow.csv failed: ReadTimeout"):
        fetching.add_from_url(
            workspace,
            "slow",
            site.url("/slow.csv"),
            IngestOptions(),
            SourceOptions(timeout=0.3, retries=0),
            source=WebSource(allow_networks=LOOPBACK),
        )
