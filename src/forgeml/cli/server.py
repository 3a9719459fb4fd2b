"""`forgeml server`: the long-lived scheduler loop queued jobs wait for, the pipeline
triggers it evaluates each cycle, and the deployments' replica autoscaler."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace


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
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Serve the scheduler's Prometheus metrics (queues, jobs, cost) on this port.",
            min=1,
            max=65535,
        ),
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="Interface the metrics listen on.")] = (
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
    with (
        hold_lease(workspace.settings, chosen.name),
        gateway as gateway_url,
        _metrics(workspace, metrics_host, metrics_port) as metrics_url,
    ):
        scheduler = Scheduler(
            workspace, chosen, grace_seconds=grace, policy_options=_policy_options(min_runtime)
        )
        logging.info(
            "forgeml server: %s executor, %d node(s), home %s%s%s",
            chosen.name, len(scheduler.nodes), workspace.settings.home.resolve(),
            f", gateway on {gateway_url}" if gateway_url else "",
            f", metrics on {metrics_url}/metrics" if metrics_url else "",
        )  # fmt: skip
        every = interval or workspace.settings.scheduler_interval
        with _triggers(workspace, every, stop), _autoscaler(workspace, stop):
            scheduler.serve_forever(every, stop)
    logging.info("forgeml server stopped; running jobs keep running")


@contextlib.contextmanager
def _triggers(workspace: Workspace, interval: float, stop: threading.Event) -> Iterator[None]:
    """Pipeline triggers evaluated every `interval` in a thread of their own while the
    scheduler loop runs (the scheduler itself knows nothing of pipelines)."""
    from forgeml.pipelines.triggers import serve_triggers

    thread = threading.Thread(
        target=serve_triggers, args=(workspace, interval, stop), name="triggers", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


@contextlib.contextmanager
def _autoscaler(workspace: Workspace, stop: threading.Event) -> Iterator[None]:
    """The deployments' replica autoscaler in a thread of its own while the server runs."""
    from forgeml.serve.autoscale_loop import INTERVAL_S, serve_autoscaler

    thread = threading.Thread(
        target=serve_autoscaler, args=(workspace, INTERVAL_S, stop), name="autoscaler", daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


@contextlib.contextmanager
def _metrics(workspace: Workspace, host: str, port: int | None) -> Iterator[str | None]:
    """The scheduler's /metrics on `host:port` while the server runs (None: not served)."""
    if port is None:
        yield None
        return
    from prometheus_client import start_http_server

    from forgeml.core.errors import UsageError
    from forgeml.scheduler.metrics import scheduler_registry

    try:
        server, thread = start_http_server(port, host, scheduler_registry(workspace.store))
    except OSError as error:
        raise UsageError(f"Cannot serve metrics on {host}:{port}: {error.strerror}.") from None
    try:
        yield f"http://{host}:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _policy_options(min_runtime: float | None) -> object:
    from forgeml.scheduler.policy import PolicyOptions

    if min_runtime is None:
        return PolicyOptions()
    return PolicyOptions(min_runtime_s=min_runtime)
