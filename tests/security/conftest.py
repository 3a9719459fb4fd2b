from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.serve.conftest import serve_template, served_home  # noqa: F401  (fixtures)


@dataclass
class Site:
    """A loopback HTTP server: `routes` maps a path to (status, headers, body); `seen`
    records (method, path, Host header) of every request that reached it."""

    url: str
    port: int
    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    seen: list[tuple[str, str, str]] = field(default_factory=list)


@pytest.fixture
def site() -> Iterator[Site]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            state.seen.append((self.command, self.path, self.headers.get("Host", "")))
            status, headers, body = state.routes.get(self.path, (404, {}, b"no such page"))
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer  # noqa: N815  (http.server's names)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    state = Site(f"http://127.0.0.1:{port}", int(port))
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
