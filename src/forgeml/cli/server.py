"""`forgeml server`: the long-lived scheduler loop queued jobs wait for, and beside it, each
in a thread of its own: the pipeline triggers, the deployments' replica autoscaler, the
monitor's drift and accuracy gauges, the alert rules evaluated over the server's own
samples, and (when asked) the gateway, the metrics endpoint and the control-plane API."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from forgeml.core.workspace import Workspace


def server(
    executor: Annotated[str, typer.Option(help="local, ray or kubernetes.")] = "local",
    address: Annotated[str | None, typer.Option(help="Ray cluster address (host:port).")] = None,
    ray_token_file: Annotated[
        Path | None,
        typer.Option(
            help="File holding the Ray cluster's authentication token (Ray's token auth); "
            "default: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token, as Ray reads.",
        ),
    ] = None,
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
            help="Serve the Prometheus metrics (queues, jobs, cost, drift, accuracy) on this port.",
            min=1,
            max=65535,
        ),
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="Interface the metrics listen on.")] = (
        "127.0.0.1"
    ),
    monitor_interval: Annotated[
        float,
        typer.Option(
            help="Seconds between two measures of each served model's drift and accuracy.",
            min=0.1,
        ),
    ] = 10.0,
    alert_config: Annotated[
        Path | None,
        typer.Option(
            help="Alert channels, extra rule files and targets (YAML); without it alerts are "
            "still evaluated and recorded, and sent nowhere.",
        ),
    ] = None,
    api_port: Annotated[
        int | None,
        typer.Option(
            help="Serve the control-plane API (under /api/v1) and the web UI (at /) on this port.",
            min=1,
            max=65535,
        ),
    ] = None,
    api_host: Annotated[str, typer.Option(help="Interface the API listens on.")] = "127.0.0.1",
    auth: Annotated[
        str,
        typer.Option(
            help="Who may call the API: accounts (every caller signs in with a token or "
            "password), single-user (the local person, no login; loopback only), or auto "
            "(accounts once one exists).",
        ),
    ] = "auto",
    trusted_proxy: Annotated[
        list[str] | None,
        typer.Option(
            help="Address of a reverse proxy in front of the API (repeat): only requests from "
            "it are placed by X-Forwarded-For (sign-in limits per client address). "
            "Default FORGEML_AUTH_TRUSTED_PROXIES, else none.",
        ),
    ] = None,
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log",
            help="Log each API request on stdout (client, method, path without its query "
            "string, status).",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="Another name clients reach the API by (repeat), e.g. its DNS name or the "
            "one a proxy forwards; a request naming any other host is refused (DNS "
            "rebinding). The bound address, and the loopback names on loopback, always are.",
        ),
    ] = None,
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="Origin (scheme://host[:port]) of another site whose pages may send changes "
            "to the API (repeat); by default only the API's own origin may.",
        ),
    ] = None,
    oidc_config: Annotated[
        Path | None,
        typer.Option(
            help="Also sign people in through an OpenID Connect provider (YAML: issuer, "
            "client_id, client_secret_env, redirect_uri, group_roles); needs accounts.",
        ),
    ] = None,
    online_run_length: Annotated[
        int,
        typer.Option(
            help="Expected rows between false alarms (ARL) of each served model version's "
            "online drift detector (ForgemlOnlineDriftAlarm).",
            min=10,
            max=10_000_000,  # OnlineDriftConfig.run_length's bounds (a test compares them)
        ),
    ] = 100_000,
) -> None:
    """Run the scheduler until SIGTERM/Ctrl-C; running jobs survive a restart and are re-adopted."""
    from forgeml.core.errors import UsageError
    from forgeml.core.workspace import open_workspace
    from forgeml.gateway import GatewayOptions, gateway_in_thread
    from forgeml.monitor.alerts import serve_alerts
    from forgeml.monitor.gauges import serve_gauges
    from forgeml.pipelines.triggers import serve_triggers
    from forgeml.scheduler.executors import create_executor
    from forgeml.scheduler.lease import hold_lease
    from forgeml.scheduler.service import Scheduler
    from forgeml.serve.autoscale_loop import INTERVAL_S, serve_autoscaler

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    workspace = open_workspace()
    registries, gauges = _registries(workspace, online_run_length)
    evaluator, alert_interval = _alert_evaluator(workspace, alert_config, registries)
    if ray_token_file is not None and executor != "ray":
        raise UsageError("--ray-token-file is for the ray executor (--executor ray).")
    chosen = create_executor(executor, address=address, token_file=ray_token_file)
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
        _metrics(registries, metrics_host, metrics_port) as metrics_url,
        _api(
            workspace,
            api_host,
            api_port,
            auth,
            trusted_proxy,
            oidc_config,
            (allowed_host or [], allowed_origin or []),
            access_log,
        ) as api_url,  # fmt: skip
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
        if api_url:
            logging.info("forgeml server: API on %s/api/v1, web UI on %s/", api_url, api_url)
        every = interval or workspace.settings.scheduler_interval
        with (
            _thread("triggers", serve_triggers, (workspace, every, stop), stop),
            _thread("autoscaler", serve_autoscaler, (workspace, INTERVAL_S, stop), stop),
            _thread("gauges", serve_gauges, (gauges, monitor_interval, stop), stop),
            _thread("alerts", serve_alerts, (evaluator, alert_interval, stop), stop),
        ):
            scheduler.serve_forever(every, stop)
    logging.info("forgeml server stopped; running jobs keep running")


@contextlib.contextmanager
def _thread(
    name: str, target: Callable[..., None], args: tuple[Any, ...], stop: threading.Event
) -> Iterator[None]:
    """`target(*args)` in a thread of its own while the scheduler loop runs; it returns
    when `stop` is set (the scheduler itself knows nothing of pipelines or monitoring)."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


def _registries(workspace: Workspace, run_length: int) -> tuple[list[CollectorRegistry], Any]:
    """The server's own metrics: the scheduler's, and the monitor's gauges (drift, online
    drift, accuracy), which the alert rules read and `--metrics-port` exports."""
    from prometheus_client import CollectorRegistry

    from forgeml.monitor.drift import OnlineDriftConfig
    from forgeml.monitor.gauges import MonitorCollector
    from forgeml.monitor.gpus import DeploymentGpuCollector
    from forgeml.scheduler.metrics import scheduler_registry
    from forgeml.tracking.metrics import TrainingCollector

    gauges = MonitorCollector(workspace, online=OnlineDriftConfig(run_length=run_length))
    monitor = CollectorRegistry(auto_describe=True)
    monitor.register(gauges)
    # the latest metrics of running training runs, and each deployment's GPU use
    monitor.register(TrainingCollector(workspace))
    monitor.register(DeploymentGpuCollector(workspace))
    return [scheduler_registry(workspace.store), monitor], gauges


def _alert_evaluator(
    workspace: Workspace, config_file: Path | None, registries: list[CollectorRegistry]
) -> tuple[Any, float]:
    """The embedded alert evaluation (rules, channels) built before anything starts, so a
    bad rule or config stops the server with one sentence."""
    from forgeml.monitor.alerts import (
        AlertConfig,
        AlertEvaluator,
        build_channels,
        load_config,
        load_rules,
    )

    config = load_config(config_file) if config_file is not None else AlertConfig()
    evaluator = AlertEvaluator(
        workspace,
        load_rules(config.rule_files),
        registries=registries,
        targets=config.targets,
        scrape_allow_private=config.scrape_allow_private,
        channels=build_channels(config),
        external_url=config.external_url,
        max_age_s=config.max_age_s,
    )
    return evaluator, config.interval_s


@contextlib.contextmanager
def _api(
    workspace: Workspace,
    host: str,
    port: int | None,
    auth: str,
    trusted_proxies: list[str] | None = None,
    oidc_config: Path | None = None,
    allowed: tuple[list[str], list[str]] = ([], []),
    access_log: bool = False,
) -> Iterator[str | None]:
    """The control-plane API on `host:port` while the server runs (None: not served);
    `allowed`: the `--allowed-host` and `--allowed-origin` values; `access_log`: a line
    per request on stdout.

    Without accounts it is served on a loopback interface only: anyone who could reach it
    would act as the local person (Ray CVE-2023-48022, ShadowRay: a job API open to all).
    """
    if port is None:
        yield None
        return
    import ipaddress

    from forgeml.api import api_in_thread
    from forgeml.api._accounts import AccountsAuthorizer, choose_authorizer
    from forgeml.auth import get_auth_settings
    from forgeml.core.errors import UsageError

    settings = get_auth_settings()
    if trusted_proxies:
        for proxy in trusted_proxies:
            try:
                ipaddress.ip_address(proxy)
            except ValueError:
                raise UsageError(f"--trusted-proxy {proxy!r} is not an IP address.") from None
        settings = settings.model_copy(update={"trusted_proxies": trusted_proxies})
    authorizer = choose_authorizer(workspace, auth, settings)
    if not isinstance(authorizer, AccountsAuthorizer):
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            raise UsageError(
                f"Serving the API on {host} without accounts would let anyone who reaches it "
                "act as you: create an account (forgeml users create NAME --role owner) or "
                "serve on 127.0.0.1."
            )
    from forgeml.auth.oidc import load_oidc_config
    from forgeml.ui import create_app

    oidc = load_oidc_config(oidc_config) if oidc_config is not None else None
    hosts = _served_hosts(host, *allowed)
    accounts = isinstance(authorizer, AccountsAuthorizer)
    logging.info("forgeml server: API %s", "with accounts" if accounts else "single user, no login")
    with api_in_thread(
        workspace, host, port, authorizer=authorizer, oidc=oidc, hosts=hosts,
        access_log=access_log, app_factory=create_app,
    ) as url:  # fmt: skip
        yield url


def _served_hosts(host: str, allowed_hosts: list[str], allowed_origins: list[str]) -> Any:
    """The API's `ServedHosts` (UsageError naming the option of a malformed value)."""
    from pydantic import ValidationError

    from forgeml.api._hosts import ServedHosts
    from forgeml.core.errors import UsageError

    try:
        return ServedHosts(bind=host, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
    except ValidationError as error:
        first = error.errors()[0]
        option = "--allowed-host" if first["loc"][0] == "allowed_hosts" else "--allowed-origin"
        message = first["msg"].removeprefix("Value error, ")
        raise UsageError(f"{option}: {message}.") from None


@contextlib.contextmanager
def _metrics(
    registries: list[CollectorRegistry], host: str, port: int | None
) -> Iterator[str | None]:
    """The server's /metrics on `host:port` while it runs (None: not served)."""
    if port is None:
        yield None
        return
    from prometheus_client import CollectorRegistry, start_http_server

    from forgeml.core.errors import UsageError

    served = CollectorRegistry(auto_describe=True)
    for registry in registries:
        served.register(_Merged(registry))
    try:
        server, thread = start_http_server(port, host, served)
    except OSError as error:
        raise UsageError(f"Cannot serve metrics on {host}:{port}: {error.strerror}.") from None
    try:
        yield f"http://{host}:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class _Merged:
    """One registry's metrics, collected into another (so one endpoint serves several)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        return iter(self.registry.collect())

    def describe(self) -> list[Any]:
        return []


def _policy_options(min_runtime: float | None) -> object:
    from forgeml.scheduler.policy import PolicyOptions

    if min_runtime is None:
        return PolicyOptions()
    return PolicyOptions(min_runtime_s=min_runtime)
