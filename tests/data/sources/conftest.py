from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace

# path (with query) -> (status, headers, body)
Route = tuple[int, dict[str, str], bytes]


@dataclass
class Site:
    """A small HTTP server on loopback whose answers each test sets."""

    base: str
    routes: dict[str, Route] = field(default_factory=dict)
    hits: list[str] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)  # path -> 503s before its answer
    stalled: set[str] = field(default_factory=set)  # paths that answer only once released
    release: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str) -> str:
        return self.base + path

    def page(self, path: str, body: bytes | str, content_type: str = "text/html") -> None:
        data = body.encode() if isinstance(body, str) else body
        self.routes[path] = (200, {"Content-Type": content_type}, data)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        self.routes[path] = (status, {"Location": location}, b"")


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.hits.append(self.path)
            key = self.path if self.path in site.routes else urlsplit(self.path).path
            if key in site.stalled:
                site.release.wait(timeout=30)
            if site.failures.get(key, 0) > 0:
                site.failures[key] -= 1
                status, headers, body = 503, {"Retry-After": "0"}, b"busy"
            else:
                status, headers, body = site.routes.get(key, (404, {}, b"not found"))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture(scope="module")
def site_server() -> Iterator[Site]:
    site = Site(base="")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def site(site_server: Site) -> Site:
    """The module's server, its routes and hits cleared for this test."""
    site_server.routes.clear()
    site_server.hits.clear()
    site_server.failures.clear()
    site_server.stalled.clear()
    return site_server


@pytest.fixture
def home_workspace(tmp_path: Path) -> Iterator[Workspace]:
    """The workspace the `cli` fixture's commands write to, opened directly."""
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        yield workspace
    finally:
        workspace.close()
