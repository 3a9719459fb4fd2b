"""HTTP to the control plane: the bearer token, keyset pages followed, errors as sentences.

Only http(s) servers are spoken to. A server that cannot be reached, and a token it does
not take, end as one sentence naming what to do; an answer `{"error": ...}` becomes the
`ForgemlError` the local code raises (`_errors`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any
from urllib.parse import urlsplit

import httpx
import orjson

from forgeml.client._errors import error_for
from forgeml.client._settings import PROJECT_HEADER
from forgeml.core.errors import AuthenticationError, ConfigError, ServiceUnavailableError

API = "/api/v1"
# the API's page cap (`forgeml.api._pages.MAX_LIMIT`): the fewest round trips per list
PAGE_LIMIT = 500
NEXT_HEADER = "X-Next-Cursor"


def check_server(server: str) -> str:
    """`server` without its trailing slash, or ConfigError when it is not an http(s) URL."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"The forgeml server must be an http(s) URL such as http://127.0.0.1:8080, "
            f"not '{server}' (FORGEML_SERVER or --server)."
        )
    return server.rstrip("/")


class Transport:
    """One connection pool to one server, as one caller (its token)."""

    def __init__(
        self,
        server: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        project: str | None = None,
    ) -> None:
        self.server = check_server(server)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if project:
            headers[PROJECT_HEADER] = project
        self._http = httpx.Client(base_url=self.server + API, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._json(self.send("GET", path, params=params))

    def post(self, path: str, body: Any = None, **request: Any) -> Any:
        if body is not None:
            request["json"] = body
        return self._json(self.send("POST", path, **request))

    def upload(
        self, path: str, content: IO[bytes], media_type: str, params: Mapping[str, Any]
    ) -> Any:
        """POST the open binary file `content` as the body, read a block at a time (never
        whole in memory); its JSON answer. No read timeout: the server answers once it has
        taken in the whole upload, which may be long after the last byte was sent."""
        return self._json(
            self.send(
                "POST",
                path,
                params=params,
                content=content,
                headers={"Content-Type": media_type},
                timeout=httpx.Timeout(self._http.timeout.connect, read=None),
            )
        )

    def send_json(self, method: str, path: str, body: Any = None) -> Any:
        """A PUT, PATCH or DELETE (with a JSON `body`, if given), its JSON answer."""
        request = {} if body is None else {"json": body}
        return self._json(self.send(method, path, **request))

    def pages(self, path: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Every item of a list route, its keyset pages followed to the end."""
        return [item for page in self._pages(path, dict(params or {})) for item in page]

    def _pages(self, path: str, params: dict[str, Any]) -> Iterator[list[Any]]:
        params.setdefault("limit", PAGE_LIMIT)
        while True:
            answer = self.send("GET", path, params=params)
            yield self._json(answer)
            cursor = answer.headers.get(NEXT_HEADER)
            if not cursor:
                return
            params["after"] = cursor

    @contextmanager
    def stream(self, method: str, path: str, **request: Any) -> Iterator[httpx.Response]:
        """A streamed answer (no read timeout: a log may be quiet for long); errors as `send`."""
        try:
            with self._http.stream(
                method,
                path,
                timeout=httpx.Timeout(self._http.timeout.connect, read=None),
                **request,
            ) as answer:
                if answer.status_code >= 400:
                    answer.read()
                    raise self._error(answer)
                yield answer
        except httpx.TransportError as error:
            raise ServiceUnavailableError(
                f"Cannot reach the forgeml server at {self.server} ({_reason(error)}); "
                "is `forgeml server` running there?"
            ) from None

    def send(self, method: str, path: str, **request: Any) -> httpx.Response:
        """One request; a refused connection or an error answer raised as a ForgemlError."""
        try:
            answer = self._http.request(method, path, **request)
        except httpx.TransportError as error:
            raise ServiceUnavailableError(
                f"Cannot reach the forgeml server at {self.server} ({_reason(error)}); "
                "is `forgeml server` running there?"
            ) from None
        if answer.status_code >= 400:
            raise self._error(answer)
        return answer

    def _error(self, answer: httpx.Response) -> Exception:
        try:
            body = orjson.loads(answer.content)
        except orjson.JSONDecodeError:
            body = None
        error = error_for(answer.status_code, body, answer.headers)
        if isinstance(error, AuthenticationError):
            return AuthenticationError(
                f"The forgeml server at {self.server} refused the token: {error} "
                "Set FORGEML_TOKEN (or --token) to a token from `forgeml tokens create`."
            )
        return error

    @staticmethod
    def _json(answer: httpx.Response) -> Any:
        return orjson.loads(answer.content)


def _reason(error: httpx.TransportError) -> str:
    if isinstance(error, httpx.ConnectError):
        return "cannot connect"
    if isinstance(error, httpx.TimeoutException):
        return "no answer in time"
    return type(error).__name__
