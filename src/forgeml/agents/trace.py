"""What the loop records of a run: spans with OpenTelemetry GenAI attribute names.

The loop opens one `invoke_agent` span per run (or resumed part of one), a `chat` span
per model call and an `execute_tool` span per tool call, named and attributed as the
OpenTelemetry GenAI semantic conventions say
(https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/). Where they go is
a `Tracer`'s business: `forgeml.tracking.traces.MlflowTracer` writes MLflow traces;
`NullTracer` drops them. Tool spans start on worker threads, so a tracer takes its parent
explicitly instead of from a context variable.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

__all__ = ["NullTracer", "SpanRecord", "Tracer", "span"]


class Tracer(Protocol):
    """Where spans go. `parent=None` opens a new trace whose root is this span."""

    def start_span(
        self,
        name: str,
        kind: str,
        parent: Any | None,
        attributes: dict[str, Any],
        inputs: Any = None,
    ) -> Any:
        """Open a span; returns the handle `end_span` and children take."""
        ...

    def end_span(
        self,
        span: Any,
        outputs: Any = None,
        attributes: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        """Close `span` with its outputs, late attributes (token counts) and any error."""
        ...


class NullTracer:
    """A tracer that records nothing."""

    def start_span(
        self,
        name: str,
        kind: str,
        parent: Any | None,
        attributes: dict[str, Any],
        inputs: Any = None,
    ) -> Any:
        """See `Tracer.start_span`."""
        return None

    def end_span(
        self,
        span: Any,
        outputs: Any = None,
        attributes: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        """See `Tracer.end_span`."""


class SpanRecord:
    """An open span: set `outputs`, `attributes` or `error` before the block ends."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.outputs: Any = None
        self.attributes: dict[str, Any] = {}
        self.error: str | None = None


@contextmanager
def span(
    tracer: Tracer,
    name: str,
    kind: str,
    parent: Any | None,
    attributes: dict[str, Any],
    inputs: Any = None,
) -> Iterator[SpanRecord]:
    """A span around a block; an exception escaping it is recorded as its error."""
    record = SpanRecord(tracer.start_span(name, kind, parent, attributes, inputs))
    try:
        yield record
    except BaseException as error:
        record.error = record.error or f"{type(error).__name__}: {error}"
        raise
    finally:
        tracer.end_span(record.handle, record.outputs, record.attributes, record.error)
