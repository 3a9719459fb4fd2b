"""The gateway inside another process: served by uvicorn on its own event loop in a thread.

`forgeml server --gateway-port` (the scheduler and the gateway in one process) and
`forgeml demo` run it this way; `forgeml gateway` runs it as a process of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from forgeml.core.workspace import Workspace
from forgeml.gateway._options import GatewayOptions

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 15.0


@contextmanager
def gateway_in_thread(
    workspace: Workspace, options: GatewayOptions, host: str = "127.0.0.1", port: int = 0
) -> Iterator[str]:
    """Serve the gateway over `workspace` until the block ends; yields its base URL.

    Args:
        workspace: where deployments, keys and usage live (shared with the caller).
        options: the gateway's options.
        host: the interface to listen on.
        port: the port (0: a free one the kernel picks at bind time).

    Raises:
        ForgemlError: the port cannot be had.
        ServiceUnavailableError: the gateway did not start in time.
    """
    import uvicorn

    from forgeml.gateway._app import create_app
    from forgeml.serve.hosts import ServedHosts, guarded
    from forgeml.serve.transport import (
        CoalescingHttpProtocol,
        bind_listener,
        uvicorn_in_thread,
    )

    listener = bind_listener(host, port)
    # proxy_headers off: the gateway reads no client address, so uvicorn's X-Forwarded-*
    # rewrite of every request's scope would be work for nothing
    config = uvicorn.Config(
        guarded(create_app(workspace, options), ServedHosts(bind=host)),
        log_level="warning", access_log=False,
        http=CoalescingHttpProtocol, timeout_graceful_shutdown=10, proxy_headers=False,
    )  # fmt: skip
    # graceful stop: in-flight requests finish, usage is flushed
    with uvicorn_in_thread(config, listener, "gateway", _START_TIMEOUT_S, _STOP_TIMEOUT_S) as url:
        yield url
