"""The API served by uvicorn in a thread of `forgeml server`."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from forgeml.core.errors import ServiceUnavailableError, UsageError
from forgeml.core.workspace import Workspace

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 15.0


@contextlib.contextmanager
def api_in_thread(workspace: Workspace, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve the API over `workspace` until the block ends; yields its base URL.

    Raises:
        UsageError: the port cannot be had.
        ServiceUnavailableError: the server did not start in time.
    """
    import uvicorn

    from forgeml.api._app import create_app

    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        raise UsageError(f"Cannot serve the API on {host}:{port}: {error.strerror}.") from None
    listener.listen(128)
    config = uvicorn.Config(
        create_app(workspace), log_level="warning", access_log=False, timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [listener]}, name="forgeml-api", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise ServiceUnavailableError(
                    f"The API did not start within {_START_TIMEOUT_S:g} s."
                )
            time.sleep(0.05)
        bound_host, bound_port = listener.getsockname()[:2]
        yield f"http://{bound_host}:{bound_port}"
    finally:
        server.should_exit = True
        thread.join(timeout=_STOP_TIMEOUT_S)
        listener.close()
