"""The PromQL subset forgeml's shipped rules use, compiled once (`_query` evaluates it).

Parsing is `promql-parser` (the Rust PromQL parser of GreptimeDB, python bindings); this
module compiles its syntax tree into a small tree of its own, refusing at load time every
construct it cannot evaluate (offset, @, subqueries, group_left/right, functions outside
the list), so an unsupported rule fails when loaded, never mid-evaluation.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from forgeml.monitor.alerts._samples import Labels, SampleStore


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


ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _divide,
    "%": lambda a, b: math.fmod(a, b) if b != 0 else math.nan,
    "^": _power,
}
COMPARISON: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
    ">=": operator.ge,
    "<=": operator.le,
}
SET_OPS = ("and", "or", "unless")
_MATCH_OPS = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}
_AGGREGATIONS = ("sum", "min", "max", "avg", "count")
_RANGE_FUNCTIONS = ("rate", "min_over_time", "max_over_time", "avg_over_time")


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
    if op not in ARITHMETIC and op not in COMPARISON and op not in SET_OPS:
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
