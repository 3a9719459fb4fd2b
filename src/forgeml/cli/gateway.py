"""`forgeml gateway`: one authenticated entry point in front of every deployment."""

from __future__ import annotations

import signal
from typing import Annotated

import typer

from forgeml.cli._output import err_console


def gateway(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8080,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for a replica.")] = 30.0,
    max_body_mb: Annotated[float, typer.Option(help="Largest request body (MiB).")] = 10.0,
) -> None:
    """Serve every deployment behind API keys, limits, canary routing and retries."""
    import uvicorn

    from forgeml.core.workspace import open_workspace
    from forgeml.gateway import GatewayOptions, create_app

    if timeout <= 0 or max_body_mb <= 0:
        from forgeml.core.errors import UsageError

        raise UsageError("--timeout and --max-body-mb must be above 0.")
    options = GatewayOptions(
        request_timeout_s=timeout, max_body_bytes=int(max_body_mb * 1024 * 1024)
    )
    app = create_app(open_workspace(), options)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False,
        timeout_graceful_shutdown=10,
    )  # fmt: skip
    # uvicorn shuts down gracefully (flushing usage) and then re-raises the signal it caught
    # under the handler it found; a no-op one makes SIGTERM a clean exit 0
    signal.signal(signal.SIGTERM, lambda *_: None)
    err_console.print(f"forgeml gateway: http://{host}:{port} (stop with Ctrl-C or SIGTERM)")
    uvicorn.Server(config).run()
