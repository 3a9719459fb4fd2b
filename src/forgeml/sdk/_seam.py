"""The seam of the SDK: one call goes to the server with `FORGEML_SERVER` set, else to the
local workspace; the same shape of seam as the CLI's (`cli/_remote.py` `source`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    from forgeml.client import Client

T = TypeVar("T")


def source(remote: Callable[[Client], T], local: Callable[[], T]) -> T:
    """`remote(client)` with `FORGEML_SERVER` set (a client for `FORGEML_TOKEN`, closed
    when the call returns), else `local()`.

    Raises:
        ConfigError: `FORGEML_SERVER` is not an http(s) URL.
    """
    from forgeml.client import Client

    client = Client.from_env()
    if client is None:
        return local()
    with client:
        return remote(client)


def as_sent(answer: T) -> T:
    """A local answer as the server sends it: JSON data (datetimes as ISO 8601 strings,
    tuples as lists), encoded as the API encodes it (`api/_json.py`); other answers (a log's
    bytes, a frame) as they are."""
    if not isinstance(answer, dict | list):
        return answer
    decoded: T = orjson.loads(orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY))
    return decoded


class Following:
    """A resource of the SDK (`forgeml.sdk.models`, ...) whose every method call follows
    `FORGEML_SERVER`: the `Client`'s resource `name` (of class `remote`) with it set, else
    a `local` one's."""

    def __init__(self, name: str, remote: str, local: type) -> None:
        self._name = name
        self._remote = remote  # the `forgeml.client` class, imported when first called
        self._local = local

    def __getattr__(self, method: str) -> Callable[..., Any]:
        import forgeml.client

        remote = getattr(forgeml.client, self._remote)
        if method.startswith("_") or not (hasattr(remote, method) or hasattr(self._local, method)):
            raise AttributeError(f"forgeml.sdk.{self._name} has no method {method!r}")

        def call(*args: Any, **kwargs: Any) -> Any:
            return source(
                lambda client: self._method(getattr(client, self._name), method, remote=True)(
                    *args, **kwargs
                ),
                lambda: as_sent(self._method(self._local(), method, remote=False)(*args, **kwargs)),
            )

        call.__name__ = call.__qualname__ = method
        return call

    def _method(self, resource: object, method: str, *, remote: bool) -> Callable[..., Any]:
        found: Callable[..., Any] | None = getattr(resource, method, None)
        if found is not None:
            return found
        what = f"forgeml.sdk.{self._name}.{method}"
        if remote:
            raise UsageError(
                f"{what} has no remote mode: unset FORGEML_SERVER to run it on the local "
                "workspace, or call the API (/api/v1) directly."
            )
        raise UsageError(
            f"{what} answers only through a server: set FORGEML_SERVER (and FORGEML_TOKEN) "
            "to call it, or run the matching `forgeml` command on this machine."
        )

    def __repr__(self) -> str:
        return f"<forgeml.sdk.{self._name}: the server's with FORGEML_SERVER, else local>"
