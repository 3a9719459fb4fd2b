"""Evaluating a compiled PromQL expression over a `SampleStore` at one instant.

The semantics follow promql/engine.go, promql/functions.go and promql/quantile.go of
Prometheus 2.42 (the Debian version the tests compare against with promtool): the
5-minute lookback of instant selectors, closed range windows, `rate`'s extrapolation,
`histogram_quantile`'s bucket interpolation, the label handling of aggregations, vector
matching (`on`, `ignoring`) and set operators.
"""

from __future__ import annotations

import math

from forgeml.monitor.alerts._promql import (
    ARITHMETIC,
    COMPARISON,
    SET_OPS,
    Aggregate,
    Binary,
    HistogramQuantile,
    Negation,
    Node,
    Number,
    PromQLError,
    RangeFunction,
    Selector,
)
from forgeml.monitor.alerts._samples import Labels, SampleStore

LOOKBACK_S = 300.0
"""Prometheus' default `--query.lookback-delta`."""

Vector = dict[Labels, float]
Value = float | Vector


def evaluate(node: Node, samples: SampleStore, at: float) -> Value:
    """`node`'s value at time `at` (seconds): a float for a scalar, else a vector."""
    if isinstance(node, Number):
        return node.value
    if isinstance(node, Selector):
        vector = {}
        for labels in node.select(samples):
            value = samples.instant(labels, at, LOOKBACK_S)
            if value is not None:
                vector[labels] = value
        return vector
    if isinstance(node, RangeFunction):
        return _range_function(node, samples, at)
    if isinstance(node, Aggregate):
        return _aggregate_values(node, _vector(evaluate(node.expr, samples, at)))
    if isinstance(node, HistogramQuantile):
        quantile = evaluate(node.quantile, samples, at)
        if not isinstance(quantile, float):
            raise PromQLError("histogram_quantile's first argument must be a scalar")
        return histogram_quantile(quantile, _vector(evaluate(node.expr, samples, at)))
    if isinstance(node, Negation):
        inner = evaluate(node.expr, samples, at)
        if isinstance(inner, float):
            return -inner
        return {_drop_name(labels): -value for labels, value in inner.items()}
    return _binary_values(node, evaluate(node.lhs, samples, at), evaluate(node.rhs, samples, at))


def _vector(value: Value) -> Vector:
    if isinstance(value, float):
        raise PromQLError("expected a vector, got a scalar")
    return value


def _drop_name(labels: Labels) -> Labels:
    return tuple(item for item in labels if item[0] != "__name__")


def _range_function(node: RangeFunction, samples: SampleStore, at: float) -> Vector:
    out: Vector = {}
    for labels in node.selector.select(samples):
        points = samples.window(labels, at - node.range_s, at)
        if not points:
            continue
        values = [value for _, value in points]
        if node.function == "rate":
            rate = extrapolated_rate(points, at - node.range_s, at, node.range_s)
            if rate is None:
                continue
            result = rate
        elif node.function == "min_over_time":
            result = min(values)
        elif node.function == "max_over_time":
            result = max(values)
        else:
            result = math.fsum(values) / len(values)
        out[_drop_name(labels)] = result
    return out


def extrapolated_rate(
    points: list[tuple[float, float]], range_start: float, range_end: float, range_s: float
) -> float | None:
    """Prometheus' `rate` of a counter's `points` in [range_start, range_end]: the increase
    (counter resets added back), extrapolated to the window's edges when the first and last
    samples lie near them, and never below the counter's zero (functions.go,
    extrapolatedRate). None with fewer than two points."""
    if len(points) < 2:
        return None
    first_t, first_v = points[0]
    last_t, last_v = points[-1]
    increase = last_v - first_v
    previous = first_v
    for _, value in points[1:]:
        if value < previous:
            increase += previous
        previous = value
    to_start = first_t - range_start
    to_end = range_end - last_t
    sampled = last_t - first_t
    average_gap = sampled / (len(points) - 1)
    if increase > 0 and first_v >= 0:
        to_zero = sampled * (first_v / increase)
        to_start = min(to_start, to_zero)
    threshold = average_gap * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average_gap / 2
    interval += to_end if to_end < threshold else average_gap / 2
    return increase * (interval / sampled) / range_s


def _group_key(labels: Labels, without: bool, grouping: tuple[str, ...]) -> Labels:
    if without:
        return tuple(item for item in labels if item[0] not in grouping and item[0] != "__name__")
    return tuple(item for item in labels if item[0] in grouping)


def _aggregate_values(node: Aggregate, vector: Vector) -> Vector:
    groups: dict[Labels, list[float]] = {}
    for labels, value in vector.items():
        groups.setdefault(_group_key(labels, node.without, node.grouping), []).append(value)
    out: Vector = {}
    for key, values in groups.items():
        if node.op == "sum":
            out[key] = math.fsum(values)
        elif node.op == "avg":
            out[key] = math.fsum(values) / len(values)
        elif node.op == "count":
            out[key] = float(len(values))
        else:
            # Prometheus' min/max skip NaN unless every value is NaN
            real = [value for value in values if not math.isnan(value)]
            out[key] = (min if node.op == "min" else max)(real) if real else math.nan
    return out


def histogram_quantile(quantile: float, vector: Vector) -> Vector:
    """Prometheus' `histogram_quantile` over classic buckets (`le` labels)."""
    histograms: dict[Labels, list[tuple[float, float]]] = {}
    for labels, count in vector.items():
        le = dict(labels).get("le")
        if le is None:
            continue
        try:
            bound = float(le)
        except ValueError:
            continue
        key = tuple(item for item in labels if item[0] not in ("le", "__name__"))
        histograms.setdefault(key, []).append((bound, count))
    return {key: bucket_quantile(quantile, buckets) for key, buckets in histograms.items()}


def bucket_quantile(quantile: float, buckets: list[tuple[float, float]]) -> float:
    """The interpolated quantile of cumulative `buckets` (upper bound, count);
    quantile.go's bucketQuantile."""
    if math.isnan(quantile):
        return math.nan
    if quantile < 0:
        return -math.inf
    if quantile > 1:
        return math.inf
    merged: dict[float, float] = {}
    for bound, count in buckets:
        merged[bound] = merged.get(bound, 0.0) + count
    ordered = sorted(merged.items())
    if not ordered or not math.isinf(ordered[-1][0]) or len(ordered) < 2:
        return math.nan
    running = 0.0
    monotonic = []
    for bound, count in ordered:
        running = max(running, count)
        monotonic.append((bound, running))
    observations = monotonic[-1][1]
    if observations == 0:
        return math.nan
    rank = quantile * observations
    index = next(
        (i for i in range(len(monotonic) - 1) if monotonic[i][1] >= rank), len(monotonic) - 1
    )
    if index == len(monotonic) - 1:
        return monotonic[-2][0]
    if index == 0 and monotonic[0][0] <= 0:
        return monotonic[0][0]
    start, end, count = 0.0, monotonic[index][0], monotonic[index][1]
    if index > 0:
        start = monotonic[index - 1][0]
        count -= monotonic[index - 1][1]
        rank -= monotonic[index - 1][1]
    return start + (end - start) * (rank / count)


def _signature(labels: Labels, matching: tuple[str, tuple[str, ...]] | None) -> Labels:
    if matching is None:
        return _drop_name(labels)
    kind, names = matching
    if kind == "on":
        return tuple(item for item in labels if item[0] in names)
    return tuple(item for item in labels if item[0] not in names and item[0] != "__name__")


def _binary_values(node: Binary, lhs: Value, rhs: Value) -> Value:
    if node.op in SET_OPS:
        return _set_op(node, _vector(lhs), _vector(rhs))
    if isinstance(lhs, float) and isinstance(rhs, float):
        return _scalar_op(node, lhs, rhs)
    if isinstance(lhs, float) or isinstance(rhs, float):
        return _vector_scalar(node, lhs, rhs)
    return _vector_vector(node, lhs, rhs)


def _scalar_op(node: Binary, lhs: float, rhs: float) -> float:
    if node.op in ARITHMETIC:
        return ARITHMETIC[node.op](lhs, rhs)
    if not node.return_bool:
        raise PromQLError("a comparison between scalars needs the bool modifier")
    return 1.0 if COMPARISON[node.op](lhs, rhs) else 0.0


def _combine(node: Binary, left: float, right: float, kept: float) -> float | None:
    """The result for one matched pair: the arithmetic value, or for a comparison the kept
    value (None: filtered out), or 0/1 with bool."""
    if node.op in ARITHMETIC:
        return ARITHMETIC[node.op](left, right)
    holds = COMPARISON[node.op](left, right)
    if node.return_bool:
        return 1.0 if holds else 0.0
    return kept if holds else None


def _vector_scalar(node: Binary, lhs: Value, rhs: Value) -> Vector:
    scalar_on_left = isinstance(lhs, float)
    vector = _vector(rhs if scalar_on_left else lhs)
    scalar = lhs if scalar_on_left else rhs
    assert isinstance(scalar, float)
    drop_name = node.op in ARITHMETIC or node.return_bool
    out: Vector = {}
    for labels, value in vector.items():
        left, right = (scalar, value) if scalar_on_left else (value, scalar)
        result = _combine(node, left, right, value)
        if result is not None:
            out[_drop_name(labels) if drop_name else labels] = result
    return out


def _vector_vector(node: Binary, lhs: Vector, rhs: Vector) -> Vector:
    right_by_signature: dict[Labels, tuple[Labels, float]] = {}
    for labels, value in rhs.items():
        signature = _signature(labels, node.matching)
        if signature in right_by_signature:
            raise PromQLError(
                "found duplicate series for the match group on the right-hand side "
                "of the operation; many-to-many matching not allowed"
            )
        right_by_signature[signature] = (labels, value)
    out: Vector = {}
    drop_name = node.op in ARITHMETIC or node.return_bool
    for labels, value in lhs.items():
        signature = _signature(labels, node.matching)
        match = right_by_signature.get(signature)
        if match is None:
            continue
        result = _combine(node, value, match[1], value)
        if result is None:
            continue
        result_labels = _drop_name(labels) if drop_name else labels
        if node.matching is not None and node.matching[0] == "on":
            result_labels = signature  # one-to-one `on`: only the matched labels stay
        elif node.matching is not None:
            result_labels = tuple(item for item in result_labels if item[0] not in node.matching[1])
        if result_labels in out:
            raise PromQLError("multiple matches for labels: many-to-one matching must be explicit")
        out[result_labels] = result
    return out


def _set_op(node: Binary, lhs: Vector, rhs: Vector) -> Vector:
    right = {_signature(labels, node.matching) for labels in rhs}
    if node.op == "and":
        return {k: v for k, v in lhs.items() if _signature(k, node.matching) in right}
    if node.op == "unless":
        return {k: v for k, v in lhs.items() if _signature(k, node.matching) not in right}
    left = {_signature(labels, node.matching) for labels in lhs}
    out = dict(lhs)
    for labels, value in rhs.items():
        if _signature(labels, node.matching) not in left:
            out[labels] = value
    return out
