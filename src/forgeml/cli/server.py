"""`forgeml server`: the long-lived scheduler loop queued jobs wait for."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import Annotated

import typer


def server(
    executor: Annotated[str, typer.Option(help="local, ray or kubernetes.")] = "local",
    address: Annotated[str | None, typer.Option(help="Ray cluster address (host:port).")] = None,
    interval: Annotated[
        float | None,
        typer.Option(help="Seconds between cycles (default FORGEML_SCHEDULER_INTERVAL)."),
    ] = None,
    grace: Annotated[
        float, typer.Option(help="Seconds between SIGTERM and kill on preemption.")
    ] = 30.0,
    min_runtime: Annotated[
        float | None,
        typer.Option(help="Seconds a job runs before it may be preempted (default: policy's)."),
    ] = None,
    gateway_port: Annotated[
        int | None,
        typer.Option(
            help="Also serve the API gateway (as `forgeml gateway`) on this port.", min=1, max=65535
        ),
    ] = None,
    gateway_host: Annotated[str, typer.Option(help="Interface the gateway listens on.")] = (
        "127.0.0.1"
    ),
) -> None:
    """Run the scheduler until SIGTERM/Ctrl-C; running jobs survive a restart and are re-adopted."""
    from forgeml.core.workspace import open_workspace
    from forgeml.gateway import GatewayOptions, gateway_in_thread
    from forgeml.scheduler.executors import create_executor
    from forgeml.scheduler.lease import hold_lease
    from forgeml.scheduler.service import Scheduler

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    workspace = open_workspace()
    chosen = create_executor(executor, address=address)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    gateway = (
        gateway_in_thread(workspace, GatewayOptions(), gateway_host, gateway_port)
        if gateway_port is not None
        else contextlib.nullcontext(None)
    )
    with hold_lease(workspace.settings, chosen.name), gateway as gateway_url:
        scheduler = Scheduler(
            workspace, chosen, grace_seconds=grace, policy_options=_policy_options(min_runtime)
        )
        logging.info(
            "forgeml server: %s executor, %d node(s), home %s%s",
            chosen.name, len(scheduler.nodes), workspace.settings.home.resolve(),
            f", gateway on {gateway_url}" if gateway_url else "",
        )  # fmt: skip
        scheduler.serve_forever(interval or workspace.settings.scheduler_interval, stop)
    logging.info("forgeml server stopped; running jobs keep running")


def _policy_options(min_runtime: float | None) -> object:
    from forgeml.scheduler.policy import PolicyOptions

    if min_runtime is None:
        return PolicyOptions()
    return PolicyOptions(min_runtime_s=min_runtime)
