"""The API served by uvicorn in a thread of `forgeml server`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ForgemlError, UsageError
from forgeml.core.workspace import Workspace

if TYPE_CHECKING:
    from forgeml.api._authz import Authorizer
    from forgeml.api._hosts import ServedHosts
    from forgeml.api._limits import ApiLimits
    from forgeml.auth.oidc import OidcConfig


@contextlib.contextmanager
def api_in_thread(
    workspace: Workspace,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    authorizer: Authorizer | None = None,
    limits: ApiLimits | None = None,
    oidc: OidcConfig | None = None,
    hosts: ServedHosts | None = None,
    access_log: bool = False,
    app_factory: Callable[..., Any] | None = None,
) -> Iterator[str]:
    """Serve the API over `workspace` until the block ends; yields its base URL.

    `authorizer`, `limits` and `oidc` are `create_app`'s; `hosts` too, bound to `host`
    (default: the names of `host` alone). `access_log`: a line per request on stdout, its
    path without the query string (`_access_log`). `app_factory`: builds the app from
    `create_app`'s arguments (default `create_app`); `forgeml server` passes the web UI's
    (`forgeml.ui.create_app`, which the API may not import).

    Raises:
        UsageError: the port cannot be had, or OIDC is asked for without accounts.
        ServiceUnavailableError: the server did not start in time.
    """
    import uvicorn

    from forgeml.api._access_log import access_log_config
    from forgeml.api._app import create_app
    from forgeml.api._hosts import ServedHosts
    from forgeml.serve.transport import bind_listener, uvicorn_in_thread

    # the app first: one that cannot be made (OIDC without accounts) leaves no socket open
    served = (hosts or ServedHosts()).model_copy(update={"bind": host})
    app = (app_factory or create_app)(workspace, authorizer, limits=limits, oidc=oidc, hosts=served)
    try:
        listener = bind_listener(host, port)
    except ForgemlError as error:
        raise UsageError(f"Cannot serve the API: {error}") from None
    logs: dict[str, Any] = (
        {"log_level": "info", "access_log": True, "log_config": access_log_config()}
        if access_log
        else {"log_level": "warning", "access_log": False}
    )
    config = uvicorn.Config(
        app,
        **logs,
        timeout_graceful_shutdown=5,
        # the client address is the peer's: uvicorn would otherwise take X-Forwarded-For
        # from any local peer (its forwarded_allow_ips default), letting a caller on this
        # machine pick the address sign-in limits count against; forgeml.auth reads the
        # header itself, from the proxies it was told of (Fleet CVE-2026-46356)
        proxy_headers=False,
    )
    with uvicorn_in_thread(config, listener, "API") as url:
        yield url
