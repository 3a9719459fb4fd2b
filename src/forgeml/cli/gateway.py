"""`forgeml gateway`: one authenticated entry point in front of every deployment."""

from __future__ import annotations

import signal
from typing import Annotated

import typer

from forgeml.cli._output import err_console
from forgeml.core.errors import UsageError
from forgeml.gateway import GatewayOptions

_FIELDS = GatewayOptions.model_fields
_MIB = 1024 * 1024
# option field -> the flag that sets it
_FLAGS = {"request_timeout_s": "--timeout", "max_body_bytes": "--max-body-mb"}


def _help(name: str) -> str:
    return _FIELDS[name].description or ""  # one source of truth: the option's own field


def gateway(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8080,
    timeout: Annotated[float, typer.Option(help=_help("request_timeout_s"))] = _FIELDS[
        "request_timeout_s"
    ].default,
    max_body_mb: Annotated[
        float, typer.Option(help=f"{_help('max_body_bytes').rstrip('.')} (MiB).")
    ] = _FIELDS["max_body_bytes"].default / _MIB,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="Another name clients reach the gateway by (repeat), e.g. its DNS name; a "
            "request naming any other host is refused (DNS rebinding). The bound address, "
            "and the loopback names on loopback, always are.",
        ),
    ] = None,
) -> None:
    """Serve every deployment behind API keys, limits, canary routing and retries."""
    import uvicorn
    from pydantic import ValidationError

    from forgeml.core.workspace import open_workspace
    from forgeml.gateway import create_app
    from forgeml.serve.hosts import guarded, served_hosts
    from forgeml.serve.transport import CoalescingHttpProtocol

    try:
        options = GatewayOptions(request_timeout_s=timeout, max_body_bytes=int(max_body_mb * _MIB))
    except ValidationError as error:
        first = error.errors()[0]
        raise UsageError(f"Invalid {_FLAGS[str(first['loc'][0])]}: {first['msg']}.") from None
    hosts = served_hosts(host, allowed_host or [])
    app = guarded(create_app(open_workspace(), options), hosts)
    config = uvicorn.Config(  # proxy_headers off: the gateway reads no client address
        app, host=host, port=port, log_level="warning", access_log=False,
        timeout_graceful_shutdown=10, http=CoalescingHttpProtocol, proxy_headers=False,
    )  # fmt: skip
    # uvicorn shuts down gracefully (flushing usage) and then re-raises the signal it caught
    # under the handler it found; a no-op one makes SIGTERM a clean exit 0
    signal.signal(signal.SIGTERM, lambda *_: None)
    err_console.print(f"forgeml gateway: http://{host}:{port} (stop with Ctrl-C or SIGTERM)")
    uvicorn.Server(config).run()
