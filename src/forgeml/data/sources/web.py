"""Web sources: a file at an `https://` URL, or the records of a (paginated) JSON API.

A URL is read as a JSON API when `--json-path`, `--next` or `--cursor` is given, or when it
answers a JSON document (`application/json`); the records of every page are written, in
order, as JSON Lines. Otherwise the answer is a file of any format `data add` reads,
named after the URL's path (or its Content-Type) so the format is detected as locally.
Pages follow either a next link in the answer (`--next links.next`) or a cursor sent
back as a query parameter (`--cursor after=meta.cursor`). A web answer can change, so the
source is live: the bytes read are kept and `data rebuild` replays the version from them.
"""

from __future__ import annotations

import time
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO
from urllib.parse import unquote, urljoin, urlsplit

from forgeml.core import netguard
from forgeml.core.errors import SourceError, UsageError
from forgeml.data.sources._http import HttpGetter, Reply, Sleeper
from forgeml.data.sources.base import Fetched, SourceOptions, dotted, redact_secrets, refuse_options

_CONTENT_SUFFIXES = {
    "text/csv": ".csv",
    "text/tab-separated-values": ".tsv",
    "application/x-ndjson": ".jsonl",
    "application/jsonl": ".jsonl",
    "application/vnd.apache.parquet": ".parquet",
    "application/x-parquet": ".parquet",
}
_JSON_TYPES = ("application/json",)


class WebSource:
    """A file or a JSON API over http(s), each request through the SSRF guard."""

    kind = "web"

    def __init__(
        self,
        sleep: Sleeper = time.sleep,
        resolver: netguard.Resolver = netguard.resolve,
        allow_networks: tuple[str, ...] = (),
    ) -> None:
        self.sleep, self.resolver, self.allow_networks = sleep, resolver, allow_networks

    def accepts(self, url: str) -> bool:
        return url.split("://", 1)[0].lower() in ("http", "https")

    def fetch(self, url: str, options: SourceOptions, workdir: Path) -> Fetched:
        refuse_options(self.kind, options, ("table", "query"))
        if options.next is not None and options.cursor is not None:
            raise UsageError("Give --next or --cursor, not both: a JSON API pages one way.")
        with self.getter(options) as getter:
            first = None
            if options.json_path is None and not options.next and not options.cursor:
                download = workdir / "download"
                with download.open("w+b") as sink:
                    first = getter.get_ok(url, sink=sink)
                    if first.content_type in _JSON_TYPES:  # a JSON document: its records
                        sink.seek(0)
                        first.body = sink.read()
                if first.content_type not in _JSON_TYPES:
                    raw = download.rename(workdir / _file_name(first))
                    size = {"bytes": raw.stat().st_size}
                    return Fetched(raw, "auto", live=True, params=size)
            raw = workdir / "records.jsonl"
            with raw.open("wb") as out:
                pages, records = _read_pages(getter, url, options, first, out)
        params: dict[str, Any] = {
            "json_path": options.json_path,
            "next": options.next,
            "cursor": options.cursor,
        }
        params |= {"pages": pages, "records": records}
        return Fetched(raw, "jsonl", live=True, params=params)

    def recorded_url(self, url: str) -> str:
        return redact_secrets(url)

    def readable(self, fetched: Fetched, workdir: Path) -> Path:
        return fetched.raw

    def getter(self, options: SourceOptions) -> HttpGetter:
        """An `HttpGetter` under `options`, with this source's sleeper and resolver."""
        return HttpGetter.under(options, self.sleep, self.resolver, self.allow_networks)


def _file_name(reply: Reply) -> str:
    """A local name whose suffix tells `ingest` the format (`x.csv.gz` stays `x.csv.gz`)."""
    name = PurePosixPath(unquote(urlsplit(reply.url).path)).name
    if name and PurePosixPath(name).suffix and name not in (".", ".."):
        return name.replace("\\", "_")
    return "download" + _CONTENT_SUFFIXES.get(reply.content_type, "")


def _read_pages(
    getter: HttpGetter, url: str, options: SourceOptions, first: Reply | None, out: BinaryIO
) -> tuple[int, int]:
    """Write every page's records to `out`; (pages, records)."""
    import orjson

    page_url, params, seen = url, None, set[str]()
    records = 0
    for page in range(1, options.max_pages + 1):
        reply = first if first is not None and page == 1 else getter.get_ok(page_url, params)
        document = _parse_json(reply)
        items = dotted(document, options.json_path)
        if not isinstance(items, list):
            where = f"at '{options.json_path}'" if options.json_path else "at its top level"
            raise SourceError(
                f"The JSON answer of {reply.url} has no list of records {where}; point "
                "--json-path at it."
            )
        for item in items:
            out.write(orjson.dumps(item if isinstance(item, dict) else {"value": item}) + b"\n")
        records += len(items)
        seen.add(reply.url)
        following = _next_request(document, reply, url, options)
        if following is None:
            return page, records
        page_url, params = following
        if params is None and page_url in seen:
            return page, records  # a next link back to a page already read: the end
    raise SourceError(
        f"The API at {url} has more than {options.max_pages} pages; raise --max-pages to read "
        "them all."
    )


def _next_request(
    document: Any, reply: Reply, url: str, options: SourceOptions
) -> tuple[str, dict[str, str] | None] | None:
    if options.next is not None:
        link = dotted(document, options.next)
        return (urljoin(reply.url, str(link)), None) if link else None
    if options.cursor is not None:
        param, _, path = options.cursor.partition("=")
        value = dotted(document, path.strip())
        return (url, {param.strip(): str(value)}) if value not in (None, "") else None
    return None


def _parse_json(reply: Reply) -> Any:
    import orjson

    try:
        return orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        raise SourceError(
            f"The answer of {reply.url} is not JSON ({reply.content_type or 'no content type'})."
        ) from None
