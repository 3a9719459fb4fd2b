"""The PromQL subset forgeml's shipped rules use, compiled once and evaluated over a
`SampleStore` with Prometheus 2.x semantics.

Parsing is `promql-parser` (the Rust PromQL parser of GreptimeDB, python bindings); this
module compiles its syntax tree into a small tree of its own, refusing at load time every
construct it cannot evaluate (offset, @, subqueries, group_left/right, functions outside
the list), so an unsupported rule fails when loaded, never mid-evaluation. The semantics
follow promql/engine.go and promql/functions.go of Prometheus 2.42 (the Debian version
the tests compare against with promtool): the 5-minute lookback of instant selectors,
closed range windows, `rate`'s extrapolation, `histogram_quantile`'s bucket
interpolation, label handling of aggregations and vector matching.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from forgeml.monitor.alerts._samples import Labels, SampleStore

LOOKBACK_S = 300.0
"""Prometheus' default `--query.lookback-delta`."""

Vector = dict[Labels, float]
Value = float | Vector


class PromQLError(ValueError):
    """An expression forgeml cannot evaluate (the message is one sentence)."""


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str  # =, !=, =~, !~
    value: str
    pattern: re.Pattern[str] | None = None

    def matches(self, labels: dict[str, str]) -> bool:
        actual = labels.get(self.name, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        assert self.pattern is not None
        found = self.pattern.fullmatch(actual) is not None
        return found if self.op == "=~" else not found


@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class Selector:
    name: str | None
    matchers: tuple[Matcher, ...]

    def select(self, samples: SampleStore) -> list[Labels]:
        chosen = []
        for labels in samples.series(self.name):
            as_dict = dict(labels)
            if all(matcher.matches(as_dict) for matcher in self.matchers):
                chosen.append(labels)
        return chosen


@dataclass(frozen=True)
class RangeFunction:
    function: str
    selector: Selector
    range_s: float


@dataclass(frozen=True)
class Aggregate:
    op: str
    without: bool
    grouping: tuple[str, ...]
    expr: Node


@dataclass(frozen=True)
class HistogramQuantile:
    quantile: Node
    expr: Node


@dataclass(frozen=True)
class Negation:
    expr: Node


@dataclass(frozen=True)
class Binary:
    op: str
    lhs: Node
    rhs: Node
    return_bool: bool = False
    # None: match on every label but the name; else ("on" | "ignoring", labels)
    matching: tuple[str, tuple[str, ...]] | None = field(default=None)


Node = Number | Selector | RangeFunction | Aggregate | HistogramQuantile | Negation | Binary


def _divide(a: float, b: float) -> float:
    """IEEE division, as Go's: x/0 is +-Inf, 0/0 NaN."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _power(a: float, b: float) -> float:
    try:
        return float(a**b)
    except (OverflowError, ZeroDivisionError):
        return math.inf


_ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
    "%": lambda a, b: math.fmod(a, b) if b != 0 else math.nan,
    "^": _power,
}
_COMPARISON: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
}
_SET = ("and", "or", "unless")
_MATCH_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
_AGGREGATIONS = ("sum", "min", "max", "avg", "count")
_RANGE_FUNCTIONS = ("rate", "min_over_time", "max_over_time", "avg_over_time")


# --- compiling ---------------------------------------------------------------------------


def compile_expr(text: str) -> Node:
    """Parse and compile `text`.

    Raises:
        PromQLError: a syntax error (the parser's message) or a construct outside the
            supported subset (named).
    """
    import promql_parser

    try:
        tree = promql_parser.parse(text)
    except ValueError as error:
        raise PromQLError(str(error).rstrip(".")) from None
    node = _compile(tree)
    if _is_scalar(node):
        raise PromQLError("an alert expression must return a vector, not a scalar")
    return node


def _is_scalar(node: Node) -> bool:
    if isinstance(node, Number):
        return True
    if isinstance(node, Negation):
        return _is_scalar(node.expr)
    if isinstance(node, Binary):
        return _is_scalar(node.lhs) and _is_scalar(node.rhs)
    return False


def _compile(tree: object) -> Node:
    import promql_parser as pp

    if isinstance(tree, pp.ParenExpr):
        return _compile(tree.expr)
    if isinstance(tree, pp.NumberLiteral):
        return Number(float(tree.val))
    if isinstance(tree, pp.UnaryExpr):
        return Negation(_compile(tree.expr))
    if isinstance(tree, pp.VectorSelector):
        return _selector(tree)
    if isinstance(tree, pp.AggregateExpr):
        return _aggregate(tree)
    if isinstance(tree, pp.Call):
        return _call(tree)
    if isinstance(tree, pp.BinaryExpr):
        return _binary(tree)
    if isinstance(tree, pp.MatrixSelector):
        raise PromQLError("a range selector is supported only inside " + _names(_RANGE_FUNCTIONS))
    kind = type(tree).__name__.removesuffix("Expr").lower()
    raise PromQLError(f"{kind} expressions are not supported by forgeml's evaluator")


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1]


def _selector(tree: object) -> Selector:
    import promql_parser as pp

    assert isinstance(tree, pp.VectorSelector)
    if tree.offset is not None or tree.at is not None:
        raise PromQLError("offset and @ modifiers are not supported by forgeml's evaluator")
    if tree.matchers.or_matchers:
        raise PromQLError("'or' inside a selector's braces is not supported")
    matchers = []
    for matcher in tree.matchers.matchers:
        op = _MATCH_OPS[str(matcher.op).rsplit(".", 1)[-1]]  # MatchOp is not hashable
        pattern = None
        if op in ("=~", "!~"):
            try:
                pattern = re.compile(matcher.value)
            except re.error as error:
                raise PromQLError(f"bad regular expression {matcher.value!r}: {error}") from None
        matchers.append(Matcher(matcher.name, op, matcher.value, pattern))
    return Selector(tree.name, tuple(matchers))


def _aggregate(tree: object) -> Aggregate:
    import promql_parser as pp

    assert isinstance(tree, pp.AggregateExpr)
    op = str(tree.op)
    if op not in _AGGREGATIONS or tree.param is not None:
        raise PromQLError(f"the aggregation {op} is not supported (only {_names(_AGGREGATIONS)})")
    modifier = tree.modifier
    without = modifier is not None and modifier.type == pp.AggModifierType.Without
    grouping = tuple(modifier.labels) if modifier is not None else ()
    return Aggregate(op, without, grouping, _compile(tree.expr))


def _call(tree: object) -> Node:
    import promql_parser as pp

    assert isinstance(tree, pp.Call)
    name = tree.func.name
    args = list(tree.args)
    if name in _RANGE_FUNCTIONS:
        matrix = args[0]
        if not isinstance(matrix, pp.MatrixSelector):
            raise PromQLError(f"{name} is supported over a range selector only, not a subquery")
        return RangeFunction(name, _selector(matrix.vector_selector), matrix.range.total_seconds())
    if name == "histogram_quantile":
        return HistogramQuantile(_compile(args[0]), _compile(args[1]))
    supported = (*_RANGE_FUNCTIONS, "histogram_quantile")
    raise PromQLError(f"the function {name} is not supported (only {_names(supported)})")


def _binary(tree: object) -> Binary:
    import promql_parser as pp

    assert isinstance(tree, pp.BinaryExpr)
    op = str(tree.op)
    modifier = tree.modifier
    matching = None
    return_bool = False
    if modifier is not None:
        return_bool = bool(modifier.return_bool)
        if modifier.card in (
            pp.VectorMatchCardinality.ManyToOne,
            pp.VectorMatchCardinality.OneToMany,
        ):
            raise PromQLError("group_left and group_right are not supported")
        if modifier.matching is not None:
            kind = "on" if modifier.matching.type == pp.LabelModifierType.Include else "ignoring"
            matching = (kind, tuple(modifier.matching.labels))
    if op not in _ARITHMETIC and op not in _COMPARISON and op not in _SET:
        raise PromQLError(f"the operator {op} is not supported")
    return Binary(op, _compile(tree.lhs), _compile(tree.rhs), return_bool, matching)


def longest_range(node: Node) -> float:
    """The longest range (seconds) any range selector in `node` reads; 0 without one."""
    if isinstance(node, RangeFunction):
        return node.range_s
    if isinstance(node, Aggregate | Negation):
        return longest_range(node.expr)
    if isinstance(node, HistogramQuantile):
        return max(longest_range(node.quantile), longest_range(node.expr))
    if isinstance(node, Binary):
        return max(longest_range(node.lhs), longest_range(node.rhs))
    return 0.0


# --- evaluating --------------------------------------------------------------------------


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
    if node.op in _SET:
        return _set_op(node, _vector(lhs), _vector(rhs))
    if isinstance(lhs, float) and isinstance(rhs, float):
        return _scalar_op(node, lhs, rhs)
    if isinstance(lhs, float) or isinstance(rhs, float):
        return _vector_scalar(node, lhs, rhs)
    return _vector_vector(node, lhs, rhs)


def _scalar_op(node: Binary, lhs: float, rhs: float) -> float:
    if node.op in _ARITHMETIC:
        return _ARITHMETIC[node.op](lhs, rhs)
    if not node.return_bool:
        raise PromQLError("a comparison between scalars needs the bool modifier")
    return 1.0 if _COMPARISON[node.op](lhs, rhs) else 0.0


def _combine(node: Binary, left: float, right: float, kept: float) -> float | None:
    """The result for one matched pair: the arithmetic value, or for a comparison the kept
    value (None: filtered out), or 0/1 with bool."""
    if node.op in _ARITHMETIC:
        return _ARITHMETIC[node.op](left, right)
    holds = _COMPARISON[node.op](left, right)
    if node.return_bool:
        return 1.0 if holds else 0.0
    return kept if holds else None


def _vector_scalar(node: Binary, lhs: Value, rhs: Value) -> Vector:
    scalar_on_left = isinstance(lhs, float)
    vector = _vector(rhs if scalar_on_left else lhs)
    scalar = lhs if scalar_on_left else rhs
    assert isinstance(scalar, float)
    drop_name = node.op in _ARITHMETIC or node.return_bool
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
    drop_name = node.op in _ARITHMETIC or node.return_bool
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
