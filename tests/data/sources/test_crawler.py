from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from forgeml.core.errors import SourceError
from forgeml.core.workspace import Workspace
from forgeml.data import catalog, fetching
from forgeml.data.ingest import IngestOptions
from forgeml.data.sources import SourceOptions
from forgeml.data.sources._html import extract
from forgeml.data.sources.crawler import CrawlSource
from tests.cli.conftest import assert_cli_error, json_out
from tests.conftest import CliResult
from tests.data.conftest import snapshot_store
from tests.data.sources.conftest import Site

Cli = Callable[..., CliResult]
ROBOTS = "User-agent: *\nDisallow: /private/\nCrawl-delay: 3\n"


def html(title: str, body: str) -> str:
    return (
        f"<html><head><title>{title}</title><style>p {{color: red}}</style></head>"
        f"<body>{body}<script>var hidden = 1;</script></body></html>"
    )


def serve_site(site: Site) -> None:
    site.page("/robots.txt", ROBOTS, "text/plain")
    site.page(
        "/",
        html(
            "Home",
            '<h1>Welcome</h1><p>Start &amp; read.</p><a href="/a#top">A</a> '
            '<a href="/private/secret">secret</a> <a href="http://example.com/">out</a> '
            '<a href="/b.pdf">pdf</a> <a href="mailto:x@example.com">mail</a>',
        ),
    )
    site.page("/a", html("Page A", '<p>About A.</p><a href="/c">C</a><a href="/">home</a>'))
    latin = html("Page Ç", "<div>Déjà <b>C</b></div>").encode("latin-1")
    site.page("/c", latin, "text/html; charset=iso-8859-1")
    site.page("/b.pdf", b"%PDF-1.4", "application/pdf")
    site.page("/private/secret", html("Secret", "<p>do not crawl</p>"))


class FakeTime:
    """A clock that moves only when the crawler sleeps."""

    def __init__(self) -> None:
        self.now, self.sleeps = 100.0, list[float]()

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_extract_keeps_visible_text_title_and_links() -> None:
    page = extract(html("T  x", '<p>one <i>two</i></p><ul><li>three</li></ul><a href="/z">z</a>'))

    assert page.title == "T x"
    assert page.text == "one two\nthree\nz"
    assert page.links == ["/z"]


def test_a_crawl_honours_robots_txt_same_host_and_its_rate(
    workspace: Workspace, site: Site
) -> None:
    serve_site(site)
    fake = FakeTime()
    source = CrawlSource(
        clock=fake.clock, sleep=fake.sleep, now=lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    )
    options = SourceOptions(allow_private=True, rate=1.0, max_pages=10)

    recorded = fetching.add_from_url(
        workspace, "site", site.url("/"), IngestOptions(), options, source=source
    )

    frame = catalog.read_frame(workspace, recorded.version)
    assert frame.columns == ["url", "title", "text", "fetched_at"]
    assert frame["url"].to_list() == [site.url("/"), site.url("/a"), site.url("/c")]
    assert frame.row(0) == (
        site.url("/"),
        "Home",
        "Welcome\nStart & read.\nA secret out pdf mail",
        "2026-01-02T03:04:05.000+00:00",
    )
    assert frame.row(2)[1:3] == ("Page Ç", "Déjà C")  # decoded by its declared charset
    assert "/private/secret" not in site.hits
    assert site.hits == ["/robots.txt", "/", "/a", "/b.pdf", "/c"]
    assert fake.sleeps == [3.0] * 4  # robots.txt's Crawl-delay beats --rate 1
    assert recorded.version.recipe["params"]["fetched"]["skipped"] == 2


def test_a_crawl_rebuilds_from_its_kept_pages(cli: Cli, site: Site) -> None:
    serve_site(site)
    site.page("/robots.txt", "User-agent: *\nDisallow: /private/\n", "text/plain")
    added = json_out(
        cli(
            "data",
            "crawl",
            "site",
            site.url("/"),
            "--allow-private",
            "--rate",
            "0",
            "--max-pages",
            "2",
            "--json",
        )
    )
    assert added["rows"] == 2

    site.routes.clear()  # the site is gone: the kept HTML is read and extracted again
    assert cli("data", "rebuild", "site").code == 0


@pytest.mark.parametrize(
    ("path", "flags", "expected"),
    [
        ("/private/secret", ["--allow-private"], "robots.txt of 127.0.0.1"),
        ("/nowhere", ["--allow-private"], "answered 404 Not Found"),
        ("/b.pdf", ["--allow-private"], "is not an HTML page"),
        ("/", [], "non-public address 127.0.0.1"),
    ],
)
def test_a_bad_start_fails_in_one_sentence_and_records_nothing(
    cli: Cli, site: Site, home_workspace: Workspace, path: str, flags: list[str], expected: str
) -> None:
    serve_site(site)
    before = snapshot_store(home_workspace)

    result = cli("data", "crawl", "site", site.url(path), "--rate", "0", *flags)

    assert_cli_error(result, expected)
    assert snapshot_store(home_workspace) == before


def test_a_robots_txt_that_fails_means_stay_away(workspace: Workspace, site: Site) -> None:
    serve_site(site)
    site.routes["/robots.txt"] = (500, {}, b"oops")
    source = CrawlSource(sleep=lambda _: None)

    with pytest.raises(SourceError, match="forbids crawling"):
        fetching.add_from_url(
            workspace,
            "site",
            site.url("/"),
            IngestOptions(),
            SourceOptions(allow_private=True, retries=0),
            source=source,
        )
    with workspace.store.session() as session:
        assert catalog.list_datasets(session) == []
