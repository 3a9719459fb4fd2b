"""GET for the web sources: the SSRF guard on every hop, retries, timeouts, a byte budget.

Every request goes through `forgeml.core.netguard.guarded_client`, whose transport checks
each URL, redirects included, and connects to the address it checked (so a redirect to
169.254.169.254, or a name that resolves to 127.0.0.1, is refused unless `allow_private`).
A network error, 429 or 5xx is retried with exponential back-off (a numeric Retry-After
wins, up to a minute); the sleeper is injected so tests do not wait. The bytes of all
answers of one source share one budget (`max_bytes`): an answer that would pass it is
refused before or while it is read, never truncated silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from forgeml.core import netguard
from forgeml.core.errors import SourceError, UnsafeUrlError
from forgeml.data.sources.base import SourceOptions, redact_secrets

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_MAX_REDIRECTS = 5
_MAX_RETRY_AFTER_S = 60.0
Sleeper = Callable[[float], None]


@dataclass
class Reply:
    """One answer, read whole."""

    url: str
    status: int
    content_type: str
    body: bytes
    charset: str | None = None

    def text(self) -> str:
        """The body decoded by its declared charset (UTF-8 when none or unknown)."""
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


class HttpGetter:
    """GETs under one SSRF policy and one byte budget; close it (or use `with`)."""

    def __init__(
        self,
        *,
        allow_private: bool,
        timeout: float,
        retries: int,
        max_bytes: int,
        sleep: Sleeper = time.sleep,
        resolver: netguard.Resolver = netguard.resolve,
        allow_networks: tuple[str, ...] = (),
        user_agent: str = "forgeml",
    ) -> None:
        policy = netguard.UrlPolicy(
            who="forgeml data", allow_private=allow_private, allow_networks=allow_networks
        )
        self._client = netguard.guarded_client(
            policy, resolver, timeout=timeout, max_redirects=_MAX_REDIRECTS
        )
        self._client.headers["User-Agent"] = user_agent
        self.retries, self.left, self.sleep = retries, max_bytes, sleep
        self.max_bytes = max_bytes

    @classmethod
    def under(
        cls,
        options: SourceOptions,
        sleep: Sleeper,
        resolver: netguard.Resolver,
        allow_networks: tuple[str, ...] = (),
        user_agent: str = "forgeml",
    ) -> HttpGetter:
        """A getter with the SSRF, timeout, retry and byte limits `options` set."""
        return cls(
            allow_private=options.allow_private,
            timeout=options.timeout,
            retries=options.retries,
            max_bytes=options.max_bytes,
            sleep=sleep,
            resolver=resolver,
            allow_networks=allow_networks,
            user_agent=user_agent,
        )

    def __enter__(self) -> HttpGetter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def get(
        self, url: str, params: dict[str, str] | None = None, sink: BinaryIO | None = None
    ) -> Reply:
        """The answer to GET `url`, whatever its status, after retries of transient ones.

        With `sink`, a 2xx body is streamed into it (from its start on each attempt) and
        `Reply.body` is empty; other bodies are read into `Reply.body` as without it.

        Raises:
            UnsafeUrlError: a hop fails the SSRF guard.
            SourceError: the host cannot be reached, or the answer is over the budget.
        """
        import httpx

        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                reply, retry_after = self._get_once(url, params, sink)
            except UnsafeUrlError:
                raise
            except (httpx.TransportError, httpx.TooManyRedirects) as exc:
                if last or isinstance(exc, httpx.TooManyRedirects):
                    raise SourceError(
                        f"GET {redact_secrets(url)} failed: {_describe(exc)}."
                    ) from None
                self.sleep(_backoff(attempt, None))
                continue
            if reply.status in _RETRY_STATUSES and not last:
                self.sleep(_backoff(attempt, retry_after))
                continue
            return reply
        raise AssertionError("unreachable: the last attempt returns or raises")

    def get_ok(
        self, url: str, params: dict[str, str] | None = None, sink: BinaryIO | None = None
    ) -> Reply:
        """`get`, raising SourceError unless the final answer is 2xx."""
        reply = self.get(url, params, sink)
        if not 200 <= reply.status < 300:
            raise SourceError(
                f"GET {redact_secrets(reply.url)} answered {reply.status} {_reason(reply.status)}."
            )
        return reply

    def _get_once(
        self, url: str, params: dict[str, str] | None, sink: BinaryIO | None
    ) -> tuple[Reply, str | None]:
        with self._client.stream("GET", url, params=params) as response:
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.left:
                raise self._oversize(url)
            streamed = sink if response.is_success else None
            if streamed is not None:
                streamed.seek(0)
                streamed.truncate()
            body, size = bytearray(), 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.left:
                    raise self._oversize(url)
                if streamed is not None:
                    streamed.write(chunk)
                else:
                    body.extend(chunk)
            self.left -= size
            reply = Reply(
                url=str(response.url),
                status=response.status_code,
                content_type=response.headers.get("content-type", "").split(";")[0].strip(),
                body=bytes(body),
                charset=response.charset_encoding,
            )
            return reply, response.headers.get("retry-after")

    def _oversize(self, url: str) -> SourceError:
        return SourceError(
            f"GET {redact_secrets(url)} is over the size limit of {self.max_bytes:,} bytes; "
            "raise --max-bytes if it is expected."
        )


def _backoff(attempt: int, retry_after: str | None) -> float:
    if retry_after is not None and retry_after.strip().isdigit():
        return min(float(retry_after), _MAX_RETRY_AFTER_S)
    return min(0.5 * 2**attempt, _MAX_RETRY_AFTER_S)


def _describe(exc: Any) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "(unknown status)"
