"""What a canary is judged on: each role's requests, server errors and latency, read from
the replicas' own `/metrics`, and the verdict against the step's bounds.

`Measures` are counter deltas since the canary started (its replicas are new, so their
counters start at zero; the primary's are read once at the start as the baseline).
With labels arriving (`POST /v2/models/NAME/feedback`), each role's accuracy on them is
compared too (`feedback_accuracy`). `judge` is pure: the canary job calls it on every look
and acts on its verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from forgeml.pipelines.steps import CanaryBounds

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.serve.deployments import Replica

_REQUESTS = "forgeml_requests"
_ERRORS = "forgeml_request_errors"
_LATENCY = "forgeml_request_latency_seconds"


@dataclass
class Measures:
    """One role's traffic: requests, 5xx answers, and the latency histogram's buckets."""

    requests: float = 0.0
    errors: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)  # upper bound -> cumulative

    def add(self, other: Measures) -> None:
        self.requests += other.requests
        self.errors += other.errors
        for bound, count in other.buckets.items():
            self.buckets[bound] = self.buckets.get(bound, 0.0) + count

    def minus(self, earlier: Measures) -> Measures:
        return Measures(
            self.requests - earlier.requests,
            self.errors - earlier.errors,
            {b: c - earlier.buckets.get(b, 0.0) for b, c in self.buckets.items()},
        )

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def p99_ms(self) -> float | None:
        """The 0.99 quantile of the latency, interpolated as Prometheus'
        `histogram_quantile` does (None without requests)."""
        bounds = sorted(self.buckets)
        if not bounds or self.buckets[bounds[-1]] <= 0:
            return None
        total = self.buckets[bounds[-1]]
        rank = 0.99 * total
        lower, below = 0.0, 0.0
        for bound in bounds:
            count = self.buckets[bound]
            if count >= rank:
                if math.isinf(bound):
                    return lower * 1000  # the highest finite bound, as Prometheus answers
                share = (rank - below) / (count - below) if count > below else 1.0
                return (lower + (bound - lower) * share) * 1000
            lower, below = bound, count
        return lower * 1000

    def as_dict(self) -> dict[str, float | None]:
        p99 = self.p99_ms()
        return {
            "requests": self.requests,
            "errors": self.errors,
            "error_rate": round(self.error_rate, 6),
            "p99_ms": None if p99 is None else round(p99, 3),
        }


def parse_measures(text: str) -> Measures:
    """A replica's totals from its Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    found = Measures()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{_REQUESTS}_total":
                found.requests += sample.value
            elif sample.name == f"{_ERRORS}_total" and sample.labels.get("status", "")[:1] == "5":
                found.errors += sample.value
            elif sample.name == f"{_LATENCY}_bucket":
                bound = float(sample.labels["le"])
                found.buckets[bound] = found.buckets.get(bound, 0.0) + sample.value
    return found


def read_roles(replicas: list[Replica], timeout: float = 5.0) -> dict[str, Measures]:
    """Each role's (primary, canary) totals over its replicas' /metrics; a replica that
    does not answer counts as nothing (its requests were answered by the others)."""
    import httpx

    roles: dict[str, Measures] = {}
    for replica in replicas:
        measures = roles.setdefault(replica.role, Measures())
        try:
            response = httpx.get(f"{replica.url}/metrics", timeout=timeout)
            response.raise_for_status()
        except httpx.HTTPError:
            continue
        measures.add(parse_measures(response.text))
    return roles


def feedback_accuracy(
    workspace: Workspace, deployment: str, since: datetime
) -> dict[str, tuple[int, float]]:
    """Per model version that answered `deployment` since `since`: how many of its answers
    got a label (`POST .../feedback`), and the share it got right."""
    from sqlalchemy import select

    from forgeml.core.store import FeedbackRecord

    right: dict[str, list[bool]] = {}
    with workspace.store.session() as session:
        rows = session.execute(
            select(FeedbackRecord.model_ref, FeedbackRecord.prediction, FeedbackRecord.label).where(
                FeedbackRecord.model == deployment, FeedbackRecord.predicted_at >= since
            )
        )
        for model_ref, prediction, label in rows:
            answer = prediction.get("label") if isinstance(prediction, dict) else None
            right.setdefault(model_ref, []).append(answer == str(label))
    return {ref: (len(hits), sum(hits) / len(hits)) for ref, hits in right.items()}


@dataclass(frozen=True)
class Verdict:
    """What to do now: `promote`, `rollback`, or None to keep watching; and why."""

    action: str | None
    reason: str


def judge(
    bounds: CanaryBounds,
    primary: Measures,
    canary: Measures,
    min_requests: int,
    final: bool,
    accuracy: tuple[tuple[int, float], tuple[int, float]] | None = None,
) -> Verdict:
    """The verdict on a canary after its window (`final`) or during it.

    A bound is judged once the canary has answered `min_requests`; a breach rolls back at
    once, a window that ends without enough traffic rolls back too (nothing was shown).
    """
    if canary.requests < max(min_requests, 1):
        if final:
            return Verdict(
                "rollback",
                f"the canary answered {canary.requests:.0f} requests in its window, "
                f"fewer than the {min_requests} it needs to be judged",
            )
        return Verdict(None, "waiting for traffic")
    if bounds.max_error_rate is not None and canary.error_rate > bounds.max_error_rate:
        return Verdict(
            "rollback",
            f"the canary's error rate {canary.error_rate:.1%} is above "
            f"{bounds.max_error_rate:.1%} ({canary.errors:.0f} of {canary.requests:.0f})",
        )
    p99 = canary.p99_ms()
    if bounds.max_p99_ms is not None and p99 is not None and p99 > bounds.max_p99_ms:
        return Verdict(
            "rollback", f"the canary's p99 {p99:.1f} ms is above {bounds.max_p99_ms:g} ms"
        )
    base = primary.p99_ms()
    ratio = p99 / base if p99 is not None and base else None
    if bounds.max_p99_ratio is not None and ratio is not None and ratio > bounds.max_p99_ratio:
        return Verdict(
            "rollback",
            f"the canary's p99 {p99:.1f} ms is {ratio:.2f}x the primary's "
            f"{base:.1f} ms (bound {bounds.max_p99_ratio:g}x)",
        )
    drop = _accuracy_drop(bounds, accuracy)
    if drop is not None:
        return drop
    if not final:
        return Verdict(None, "within bounds so far")
    return Verdict(
        "promote",
        f"{canary.requests:.0f} requests within bounds (error rate {canary.error_rate:.1%}"
        + (f", p99 {p99:.1f} ms" if p99 is not None else "")
        + ")",
    )


def _accuracy_drop(
    bounds: CanaryBounds, accuracy: tuple[tuple[int, float], tuple[int, float]] | None
) -> Verdict | None:
    """A rollback when the canary's accuracy on feedback is too far under the primary's
    (`accuracy`: (labels, accuracy) of the primary, then of the canary)."""
    if bounds.max_accuracy_drop is None or accuracy is None:
        return None
    (primary_n, primary_acc), (canary_n, canary_acc) = accuracy
    if min(primary_n, canary_n) < bounds.min_feedback:
        return None
    if primary_acc - canary_acc > bounds.max_accuracy_drop:
        return Verdict(
            "rollback",
            f"the canary's accuracy on feedback {canary_acc:.1%} ({canary_n} labels) is "
            f"{primary_acc - canary_acc:.1%} under the primary's {primary_acc:.1%}, more than "
            f"{bounds.max_accuracy_drop:.1%}",
        )
    return None
