"""`forgeml serve`: one model server process (KServe v2, `:predict`, OpenAI, /metrics)."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from forgeml.core.devices import DeviceName
from forgeml.core.errors import UsageError
from forgeml.rag.options import RagServeOptions
from forgeml.serve.options import RuntimeName, ServeOptions

if TYPE_CHECKING:
    from forgeml.cli._serve_rag import RagServing
    from forgeml.serve.hosts import ServedHosts

_FIELDS = ServeOptions.model_fields
_RAG_FIELDS = RagServeOptions.model_fields
_FLAGS = {
    "intra_op_threads": "threads", "reload_interval_s": "reload_interval",
    "allowed_hosts": "allowed_host",
}  # fmt: skip


def _help(name: str) -> str:
    return _FIELDS[name].description or ""  # one source of truth: the option's own field


def _rag_help(name: str) -> str:
    return _RAG_FIELDS[name].description or ""


def serve(
    refs: Annotated[
        list[str], typer.Argument(metavar="MODEL_REF...", help="Models: NAME, NAME@vN, NAME@alias.")
    ],
    port: Annotated[int, typer.Option(help="TCP port to listen on (1-65535).")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    runtime: Annotated[RuntimeName, typer.Option(help=_help("runtime"))] = _FIELDS[
        "runtime"
    ].default,
    device: Annotated[DeviceName, typer.Option(help=_help("device"))] = _FIELDS["device"].default,
    max_batch_size: Annotated[int | None, typer.Option(help=_help("max_batch_size"))] = None,
    max_wait_ms: Annotated[float, typer.Option(help=_help("max_wait_ms"))] = _FIELDS[
        "max_wait_ms"
    ].default,
    name: Annotated[str | None, typer.Option(help=_help("name"))] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(help=_help("allowed_hosts"))] = None,
    threads: Annotated[int | None, typer.Option(help=_help("intra_op_threads"))] = None,
    max_body_bytes: Annotated[int, typer.Option(help=_help("max_body_bytes"))] = _FIELDS[
        "max_body_bytes"
    ].default,
    freeze_heap: Annotated[bool, typer.Option(help=_help("freeze_heap"))] = True,  # own process
    reload_interval: Annotated[float, typer.Option(help=_help("reload_interval_s"))] = _FIELDS[
        "reload_interval_s"
    ].default,
    latency_objective_ms: Annotated[
        float, typer.Option(help=_help("latency_objective_ms"))
    ] = _FIELDS["latency_objective_ms"].default,
    max_tool_calls: Annotated[int, typer.Option(help=_help("max_tool_calls"))] = _FIELDS[
        "max_tool_calls"
    ].default,
    log_sample_rate: Annotated[float, typer.Option(help=_help("log_sample_rate"))] = _FIELDS[
        "log_sample_rate"
    ].default,
    log_redact: Annotated[list[str] | None, typer.Option(help=_help("log_redact"))] = None,
    log_path: Annotated[Path | None, typer.Option(help=_help("log_path"))] = None,
    feedback_window: Annotated[int, typer.Option(help=_help("feedback_window"))] = _FIELDS[
        "feedback_window"
    ].default,
    rag: Annotated[
        list[str] | None, typer.Option("--rag", metavar="INDEX", help=_rag_help("rag"))
    ] = None,
    rag_generator: Annotated[
        str | None, typer.Option(metavar="URL", help=_rag_help("rag_generator"))
    ] = None,
    rag_generator_model: Annotated[
        str | None, typer.Option(help=_rag_help("rag_generator_model"))
    ] = None,
    rag_generator_key_env: Annotated[
        str | None, typer.Option(help=_rag_help("rag_generator_key_env"))
    ] = None,
) -> None:
    """Serve models over HTTP until SIGTERM/Ctrl-C; ready when /v2/health/ready answers 200."""
    from pydantic import ValidationError

    from forgeml.serve.hosts import served_hosts

    options_input = {
        "runtime": runtime,
        "device": device,
        "max_batch_size": max_batch_size,
        "max_wait_ms": max_wait_ms,
        "name": name,
        "allowed_hosts": allowed_host or [],
        "intra_op_threads": threads,
        "max_body_bytes": max_body_bytes,
        "freeze_heap": freeze_heap,
        "reload_interval_s": reload_interval,
        "latency_objective_ms": latency_objective_ms,
        "max_tool_calls": max_tool_calls,
        "log_sample_rate": log_sample_rate,
        "log_redact": log_redact or [],
        "log_path": log_path,
        "feedback_window": feedback_window,
    }
    try:
        options = ServeOptions.model_validate(options_input)
    except ValidationError as error:
        first = error.errors()[0]
        field = str(first["loc"][0])
        flag = "--" + _FLAGS.get(field, field).replace("_", "-")
        raise UsageError(f"Invalid {flag}: {first['msg']}.") from None
    hosts = served_hosts(host, options.allowed_hosts)  # refused before any model loads
    if options.log_path is not None:  # refused before any model is resolved (CVE-2024-0087)
        from forgeml.core.config import get_settings
        from forgeml.core.workspace import inside_home

        inside_home(Path(get_settings().home), options.log_path, "request log")
    rag_options = RagServeOptions(
        rag=rag or [],
        rag_generator=rag_generator,
        rag_generator_model=rag_generator_model,
        rag_generator_key_env=rag_generator_key_env,
    )
    rag_serving = _open_rag(rag_options)  # a bad index fails here, before the port opens
    try:
        listener = _bind(host, port)
        try:
            _run(refs, options, listener, hosts, rag_serving)
        finally:
            listener.close()
    finally:
        if rag_serving is not None:
            rag_serving.close()


def _open_rag(options: RagServeOptions) -> RagServing | None:
    if not any(options.model_dump().values()):
        return None
    from forgeml.cli._serve_rag import open_rag
    from forgeml.core.workspace import open_workspace

    return open_rag(open_workspace(), options)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before models load so a taken port fails at once."""
    if not 1 <= port <= 65535:
        raise UsageError(f"Invalid --port {port}: choose a free port from 1 to 65535.")
    from forgeml.serve.transport import bind_listener

    return bind_listener(host, port)


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, minus re-raising SIGTERM after shutdown (exit -15, not 0)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            stops = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server


def _run(
    refs: list[str],
    options: ServeOptions,
    listener: socket.socket,
    hosts: ServedHosts,
    rag_serving: RagServing | None = None,
) -> None:
    import uvicorn

    from forgeml.core.workspace import open_workspace
    from forgeml.serve import ModelRepository, build_app
    from forgeml.serve.batcher import serving_batch_size
    from forgeml.serve.hosts import guarded
    from forgeml.serve.transport import CoalescingHttpProtocol

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    workspace = open_workspace()
    repository = ModelRepository(workspace, refs, options)
    repository.load()  # a bad reference or bundle fails here, before the port opens
    host, port = listener.getsockname()[:2]
    served = ", ".join(
        f"{model.current.ref if model.current else model.ref} as '{name}'"
        for name, model in repository.models.items()
    )
    batch = serving_batch_size(options.max_batch_size, options.device)
    logging.info(
        "forgeml serve: %s on http://%s:%d (%s runtime, batch <= %d, wait %g ms)",
        served, host, port, options.runtime, batch, options.max_wait_ms,
    )  # fmt: skip
    extra_routers = []
    if rag_serving is not None:
        extra_routers.append(rag_serving.router(repository, host, port))
        rag_serving.warm()
    app = guarded(build_app(repository, extra_routers=extra_routers), hosts)
    config = uvicorn.Config(
        app, log_config=None, access_log=False, timeout_graceful_shutdown=10,
        http=CoalescingHttpProtocol,
    )  # fmt: skip
    _server_class()(config).run(sockets=[listener])
    logging.info("forgeml serve stopped")
