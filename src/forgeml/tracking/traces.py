"""MLflow traces for agent runs: a root span per run, children for model and tool calls.

The agent loop (`forgeml.agents`) talks to a small `Tracer` protocol; `MlflowTracer`
is its MLflow side, over the client's imperative span API (`start_trace`, `start_span`,
`end_span`, `end_trace`) with explicit parents, since tool spans open on worker threads
where MLflow's context-variable parent would be lost. Attribute names are OpenTelemetry
GenAI's; inputs and outputs are stored as the JSON they are, never deserialised.

MLflow's trace exporter writes to the process-wide tracking URI, not to a client's: its
tracer provider is built lazily at a trace's first span, with an exporter bound to the URI
set then, and `mlflow.set_tracking_uri` rebuilds it on every change. So a trace points the
global URI at this workspace's store from its root span's start until its end has flushed
the exporter's background queue (the trace is in the store when a run returns), then puts
the URI back as it was, so no later MLflow call in the process inherits this store.
Traces open at once (the API drives runs on threads) share the setting: the first to open
sets it, the last to end puts it back, and a trace into another store waits for them.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from forgeml.tracking._mlflow import artifact_location, ensure_experiment, open_client, tracking_uri

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from forgeml.core.workspace import Workspace

__all__ = ["AGENT_EXPERIMENT", "MlflowTracer", "SpanHandle", "agent_traces"]

AGENT_EXPERIMENT = "forgeml-agents"


_URI_VARIABLE = "MLFLOW_TRACKING_URI"


@dataclass(frozen=True)
class _GlobalUri:
    """MLflow's process-wide tracking URI and the variable it mirrors (None: unset)."""

    uri: str | None
    variable: str | None


@dataclass(frozen=True)
class SpanHandle:
    """An open MLflow span: its trace, its id, whether it is the trace's root."""

    trace_id: str
    span_id: str
    root: bool


class MlflowTracer:
    """Writes an agent run's spans as an MLflow trace in the workspace's tracking store."""

    def __init__(self, workspace: Workspace, experiment: str = AGENT_EXPERIMENT) -> None:
        """A tracer into `experiment` (created when missing).

        Raises:
            TrackingUnavailableError: the tracking store cannot be opened.
        """
        with warnings.catch_warnings():
            # a span's start imports mlflow.pyfunc, whose type-hint inference warns about
            # its own `Any`s; import it here, once, so the warning is not raised mid-span
            warnings.filterwarnings("ignore", message=r".*type hint is inferred as AnyType")
            import mlflow.pyfunc.context  # noqa: F401  (imported for its side effect)

        # "Flushing the async trace logging queue before program exit" on every exit
        logging.getLogger("mlflow.tracing.export.async_export_queue").setLevel(logging.WARNING)
        self._client: MlflowClient = open_client(workspace)
        self.experiment_id = ensure_experiment(
            self._client, experiment, artifact_location(workspace.settings)
        )
        self._uri = tracking_uri(workspace.settings)

    def start_span(
        self,
        name: str,
        kind: str,
        parent: SpanHandle | None,
        attributes: dict[str, Any],
        inputs: Any = None,
    ) -> SpanHandle:
        """Open a span; with no parent, a new trace."""
        if parent is None:
            _GLOBAL.hold(self._uri)
            try:
                span = self._client.start_trace(
                    name,
                    span_type=kind,
                    inputs=inputs,
                    attributes=attributes,
                    experiment_id=self.experiment_id,
                )
            except BaseException:
                _GLOBAL.release()
                raise
            return SpanHandle(span.trace_id, span.span_id, root=True)
        span = self._client.start_span(
            name,
            trace_id=parent.trace_id,
            parent_id=parent.span_id,
            span_type=kind,
            inputs=inputs,
            attributes=attributes,
        )
        return SpanHandle(span.trace_id, span.span_id, root=False)

    def end_span(
        self,
        span: SpanHandle,
        outputs: Any = None,
        attributes: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        """Close `span` (and its trace, for a root) with outputs, attributes and status."""
        attributes = dict(attributes or {})
        if error:
            attributes["error.type"] = error.split(":", 1)[0][:200]
        status = "ERROR" if error else "OK"
        if span.root:
            import mlflow

            try:
                self._client.end_trace(
                    span.trace_id, outputs=outputs, attributes=attributes, status=status
                )
                mlflow.flush_trace_async_logging()
            finally:
                _GLOBAL.release()
        else:
            self._client.end_span(
                span.trace_id, span.span_id, outputs=outputs, attributes=attributes, status=status
            )


class _SharedGlobalUri:
    """MLflow's process-wide URI, held by the traces open now (all into one store)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._holders = 0
        self._uri: str | None = None
        self._before = _GlobalUri(None, None)

    def hold(self, uri: str) -> None:
        """Point the global URI at `uri` for one more trace; wait while it serves another."""
        with self._changed:
            self._changed.wait_for(lambda: self._holders == 0 or self._uri == uri)
            if self._holders == 0:
                self._before, self._uri = _set_global_tracking_uri(uri), uri
            self._holders += 1

    def release(self) -> None:
        """One trace less; the last one puts the URI back as it was before the first."""
        with self._changed:
            self._holders -= 1
            if self._holders == 0:
                _restore_global_tracking_uri(self._before)
                self._uri = None
                self._changed.notify_all()


_GLOBAL = _SharedGlobalUri()


def _set_global_tracking_uri(uri: str) -> _GlobalUri:
    """Point MLflow's process-wide tracking URI at `uri`; returns what it was.

    `mlflow.set_tracking_uri` also writes MLFLOW_TRACKING_URI, which forgeml's settings read,
    so the variable is put back too. The old URI is read from MLflow's module state, not
    `mlflow.get_tracking_uri()`, which resolves an unset URI to its default.
    """
    import mlflow
    from mlflow.tracking._tracking_service import utils

    before = _GlobalUri(utils._tracking_uri, os.environ.get(_URI_VARIABLE))
    mlflow.set_tracking_uri(uri)
    return before


def _restore_global_tracking_uri(before: _GlobalUri) -> None:
    import mlflow

    mlflow.set_tracking_uri(before.uri)  # type: ignore[arg-type]  # None unsets it
    if before.variable is None:
        os.environ.pop(_URI_VARIABLE, None)
    else:
        os.environ[_URI_VARIABLE] = before.variable


def agent_traces(workspace: Workspace, trace_id: str) -> list[dict[str, Any]]:
    """The spans of trace `trace_id` as plain dicts (name, type, attributes, inputs, outputs).

    Raises:
        TrackingUnavailableError: the tracking store cannot be opened.
    """
    trace = open_client(workspace).get_trace(trace_id)
    return [
        {
            "name": span.name,
            "span_type": span.span_type,
            "parent_id": span.parent_id,
            "status": str(span.status.status_code),
            "attributes": dict(span.attributes),
            "inputs": span.inputs,
            "outputs": span.outputs,
        }
        for span in trace.data.spans
    ]
