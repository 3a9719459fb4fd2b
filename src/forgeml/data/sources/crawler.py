"""A polite breadth-first crawler: one row per HTML page (url, title, text, fetched_at).

It asks each host's robots.txt first (RFC 9309 through `urllib.robotparser`: a 4xx means
no rules, a 5xx or no answer means stay away) and never fetches a path it disallows; a
start URL it disallows is an error. Requests to one host are spaced by `--rate` seconds,
or by the robots.txt `Crawl-delay` when longer, on an injected clock and sleeper. Every
request goes through the SSRF guard (`_http.HttpGetter`). The raw HTML of every page is
kept (the source is live); the rows are extracted from it, so `data rebuild` replays the
extraction from the kept pages.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

from forgeml.core import netguard
from forgeml.core.errors import SourceError, UsageError
from forgeml.data.sources._html import extract
from forgeml.data.sources._http import HttpGetter, Reply, Sleeper
from forgeml.data.sources.base import Fetched, SourceOptions, redact_secrets, refuse_options

AGENT = "forgeml"
_HTML_TYPES = ("text/html", "application/xhtml+xml")
Clock = Callable[[], float]
Now = Callable[[], datetime]


class CrawlSource:
    """Pages reached from a start URL; chosen by `data crawl`, never by `data add`."""

    kind = "crawl"

    def __init__(
        self,
        *,
        clock: Clock = time.monotonic,
        sleep: Sleeper = time.sleep,
        now: Now = lambda: datetime.now(UTC),
        resolver: netguard.Resolver = netguard.resolve,
    ) -> None:
        self.clock, self.sleep, self.now, self.resolver = clock, sleep, now, resolver

    def accepts(self, url: str) -> bool:
        return False

    def fetch(self, url: str, options: SourceOptions, workdir: Path) -> Fetched:
        refuse_options(self.kind, options, ("table", "query", "json_path", "next", "cursor"))
        if urlsplit(url).scheme not in ("http", "https"):
            raise UsageError(f"A crawl starts at an http(s) URL, not {url!r}.")
        raw = workdir / "pages.jsonl"
        getter = HttpGetter.under(options, self.sleep, self.resolver, user_agent=AGENT)
        with getter, raw.open("wb") as out:
            crawl = _Crawl(self, getter, options, out)
            pages = crawl.run(urldefrag(url).url)
        params: dict[str, Any] = {"max_pages": options.max_pages, "same_host": options.same_host}
        params |= {"rate": options.rate, "pages": pages, "skipped": crawl.skipped}
        return Fetched(raw, "jsonl", live=True, params=params)

    def recorded_url(self, url: str) -> str:
        return redact_secrets(url)

    def readable(self, fetched: Fetched, workdir: Path) -> Path:
        import orjson

        rows = workdir / "rows.jsonl"
        with fetched.raw.open("rb") as pages, rows.open("wb") as out:
            for line in pages:
                page = orjson.loads(line)
                content = extract(page["html"])
                row = {"url": page["url"], "title": content.title, "text": content.text}
                out.write(orjson.dumps(row | {"fetched_at": page["fetched_at"]}) + b"\n")
        return rows


class _Crawl:
    """One crawl's state: the frontier, the robots rules and last request per host."""

    def __init__(
        self, source: CrawlSource, getter: HttpGetter, options: SourceOptions, out: IO[bytes]
    ) -> None:
        self.source, self.getter, self.options, self.out = source, getter, options, out
        self.robots: dict[str, RobotFileParser] = {}
        self.last_request: dict[str, float] = {}
        self.skipped = 0

    def run(self, start: str) -> int:
        if not self._rules(start).can_fetch(AGENT, start):
            host = urlsplit(start).netloc
            raise SourceError(f"The robots.txt of {host} forbids crawling {start}.")
        frontier, seen, pages = deque([start]), {start}, 0
        while frontier and pages < self.options.max_pages:
            url = frontier.popleft()
            reply = self._page(url, first=pages == 0 and url == start)
            if reply is None:
                self.skipped += 1
                continue
            pages += 1
            for link in self._links(reply, start):
                if link not in seen:
                    seen.add(link)
                    frontier.append(link)
        return pages

    def _page(self, url: str, *, first: bool) -> Reply | None:
        """The page's reply, recorded; None for one skipped (the start page raises)."""
        import orjson

        if not self._rules(url).can_fetch(AGENT, url):
            return None
        self._wait_turn(url)
        try:
            reply = self.getter.get_ok(url)
        except SourceError:
            if first:
                raise
            return None
        if reply.content_type not in _HTML_TYPES:
            if first:
                raise SourceError(
                    f"The start URL {url} is not an HTML page ({reply.content_type})."
                )
            return None
        html = reply.text()
        fetched_at = self.source.now().astimezone(UTC).isoformat(timespec="milliseconds")
        self.out.write(orjson.dumps({"url": reply.url, "fetched_at": fetched_at, "html": html}))
        self.out.write(b"\n")
        return reply

    def _links(self, reply: Reply, start: str) -> Iterator[str]:
        host = urlsplit(start).netloc.lower()
        for href in extract(reply.text()).links:
            link = urldefrag(urljoin(reply.url, href)).url
            parts = urlsplit(link)
            if parts.scheme not in ("http", "https"):
                continue
            if self.options.same_host and parts.netloc.lower() != host:
                continue
            yield link

    def _rules(self, url: str) -> RobotFileParser:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self.robots:
            self.robots[origin] = self._read_robots(origin)
        return self.robots[origin]

    def _read_robots(self, origin: str) -> RobotFileParser:
        rules = RobotFileParser(origin + "/robots.txt")
        self._wait_turn(origin)
        try:
            reply = self.getter.get(origin + "/robots.txt")
        except SourceError:
            _set(rules, "disallow_all")  # RFC 9309 2.3.1.4: unreachable means disallow all
            return rules
        if 200 <= reply.status < 300:
            rules.parse(reply.text().splitlines())
        elif 400 <= reply.status < 500:
            _set(rules, "allow_all")  # RFC 9309 2.3.1.3: "unavailable" means no rules
        else:
            _set(rules, "disallow_all")
        return rules

    def _wait_turn(self, url: str) -> None:
        """Sleep until `rate` (or the host's Crawl-delay) has passed since its last request."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        delay = self.options.rate
        rules = self.robots.get(origin)
        crawl_delay = rules.crawl_delay(AGENT) if rules is not None else None
        if crawl_delay is not None:
            delay = max(delay, float(crawl_delay))
        last = self.last_request.get(origin)
        if last is not None:
            wait = last + delay - self.source.clock()
            if wait > 0:
                self.source.sleep(wait)
        self.last_request[origin] = self.source.clock()


def _set(rules: RobotFileParser, flag: str) -> None:
    """Set `allow_all` / `disallow_all`, the parser's own answers to an unusable robots.txt
    (what its `read()` sets on 4xx and 401/403; typeshed does not declare them)."""
    setattr(rules, flag, True)
