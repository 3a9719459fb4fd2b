"""The trainer's one seam to the outside: a small metric-logger interface.

`forgeml.train` never imports a tracking backend; `forgeml.tracking` implements this
protocol (MLflow, batched off the hot path) and the run wiring passes it in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class MetricLogger(Protocol):
    """Receives metrics; must return fast (the training loop calls it every step)."""

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class NullLogger:
    """Drops everything (workers of rank > 0, and runs without tracking)."""

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        return None

    def close(self) -> None:
        return None


class MemoryLogger:
    """Keeps every metric in memory (tests, and the final summary)."""

    def __init__(self) -> None:
        self.history: list[tuple[int, dict[str, float]]] = []

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.history.append((step, dict(metrics)))

    def close(self) -> None:
        return None
