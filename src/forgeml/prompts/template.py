"""Prompt templates: Jinja2 in an immutable sandbox, checked before they are stored.

MLflow's CVE-2023-6709 rendered user templates in a plain Jinja2 environment, so
`{{ ''.__class__.__mro__[1].__subclasses__() }}` reached Python's internals. Here a
template is refused when it is stored if it names anything beginning with `_`, uses
macros, includes or imports, or reads a variable it does not declare; it renders in
`ImmutableSandboxedEnvironment` with no globals, a short list of filters and string
methods, `*` and `**` bounded, a budget of loop iterations and a cap on the output.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from forgeml.core.errors import PromptTemplateError

if TYPE_CHECKING:
    from jinja2 import Template, nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_TEMPLATE_CHARS = 100_000
MAX_OUTPUT_CHARS = 1_000_000
MAX_LOOP_ITERATIONS = 100_000
_GUARD = "forgeml_render_guard"  # the rewritten tree calls it; no template may name it
_FILTERS = frozenset(
    {
        "abs", "capitalize", "count", "d", "default", "first", "float", "int", "join",
        "last", "length", "list", "lower", "max", "min", "reverse", "round", "sort",
        "string", "sum", "title", "tojson", "trim", "truncate", "unique", "upper",
        "wordcount",
    }
)  # fmt: skip
_STR_METHODS = frozenset(
    {
        "capitalize", "endswith", "lower", "lstrip", "rstrip", "split", "splitlines",
        "startswith", "strip", "title", "upper",
    }
)  # fmt: skip
_METHODS: dict[type, frozenset[str]] = {
    str: _STR_METHODS,
    dict: frozenset({"get", "items", "keys", "values"}),
}
_REFUSED_STATEMENTS = ("Macro", "CallBlock", "Import", "FromImport", "Include", "Extends")


class _RefusalError(Exception):
    """A limit a render reached; `CompiledTemplate.render` names the template."""


class _RenderGuard:
    """One render's limits: loop iterations over every loop, and the size of joined text."""

    def __init__(self, loop_limit: int) -> None:
        self.left = loop_limit

    def take(self, items: Iterable[Any]) -> Iterator[Any]:
        for item in items:
            self.left -= 1
            if self.left < 0:
                raise _RefusalError(f"ran more than {MAX_LOOP_ITERATIONS} loop iterations")
            yield item

    def concat(self, *parts: Any) -> str:
        texts = [str(part) for part in parts]
        _check_size(sum(len(text) for text in texts))
        return "".join(texts)


def _check_size(size: int) -> None:
    if size > MAX_OUTPUT_CHARS:
        raise _RefusalError(f"builds a value of more than {MAX_OUTPUT_CHARS} characters")


def _sized(value: Any) -> bool:
    return isinstance(value, str | list | tuple)


def _check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse an operation whose result would be huge, before Python builds it."""
    if operator == "%" and isinstance(left, str):
        raise _RefusalError("formats with '%'; write the values in place")
    if operator == "+" and _sized(left) and _sized(right):
        _check_size(len(left) + len(right))
    if operator == "*" and (_sized(left) or _sized(right)):
        sequence, count = (left, right) if _sized(left) else (right, left)
        if isinstance(count, int):
            _check_size(len(sequence) * count)
    powers = operator == "**" and isinstance(left, int) and isinstance(right, int)
    if powers and right > 0 and max(abs(left).bit_length(), 1) * right > 4096:
        raise _RefusalError(f"raises {left} to the power {right}")


def _join(value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    """Jinja2's `join`, sized before it is built; `attribute=` would read attributes."""
    if attribute is not None:
        raise _RefusalError("joins by attribute, which prompts do not allow")
    items = [str(item) for item in value]
    _check_size(sum(len(item) for item in items) + len(d) * max(len(items) - 1, 0))
    return d.join(items)


def _environment() -> ImmutableSandboxedEnvironment:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class PromptSandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def is_safe_callable(self, obj: Any) -> bool:
            owner = getattr(obj, "__self__", None)
            if isinstance(owner, _RenderGuard):
                return True
            allowed = _METHODS.get(type(owner), frozenset())
            return getattr(obj, "__name__", "") in allowed

    environment = PromptSandbox(undefined=StrictUndefined, autoescape=False)
    environment.globals.clear()  # range, cycler, joiner, namespace, lipsum, dict
    environment.filters = {k: v for k, v in environment.filters.items() if k in _FILTERS}
    environment.filters["join"] = _join
    return environment


@cache
def _shared_environment() -> ImmutableSandboxedEnvironment:
    return _environment()


@dataclass(frozen=True)
class CompiledTemplate:
    """A checked template and the variables it reads."""

    source: str
    variables: frozenset[str]
    template: Template
    where: str = "template"

    def render(self, values: Mapping[str, Any]) -> str:
        """The text for `values`, refused past `MAX_OUTPUT_CHARS` or the loop budget.

        Raises:
            PromptTemplateError: the sandbox refused an operation, or a limit was reached.
        """
        from jinja2 import TemplateError

        pieces: list[str] = []
        size = 0
        context = {**values, _GUARD: _RenderGuard(MAX_LOOP_ITERATIONS)}
        try:
            for piece in self.template.generate(context):
                size += len(piece)
                if size > MAX_OUTPUT_CHARS:
                    raise _RefusalError(f"rendered more than {MAX_OUTPUT_CHARS} characters")
                pieces.append(piece)
        except _RefusalError as refusal:
            raise PromptTemplateError(f"The {self.where} {refusal}.") from None
        except (TemplateError, TypeError, ValueError, ArithmeticError, RecursionError) as error:
            raise PromptTemplateError(
                _sentence(f"The {self.where} failed to render", error)
            ) from None
        return "".join(pieces)


def compile_template(source: str, where: str = "template") -> CompiledTemplate:
    """Parse and check `source`; see the module's docstring for what is refused.

    Args:
        source: The Jinja2 template text.
        where: What to call it in an error (e.g. "message 2 of prompt 'qa'").

    Raises:
        PromptTemplateError: it is too long, does not parse, or is unsafe.
    """
    from jinja2 import TemplateError, TemplateSyntaxError, meta

    if len(source) > MAX_TEMPLATE_CHARS:
        raise PromptTemplateError(
            f"The {where} has {len(source)} characters; the limit is {MAX_TEMPLATE_CHARS}."
        )
    environment = _shared_environment()
    try:
        tree = environment.parse(source)
    except TemplateSyntaxError as error:
        raise PromptTemplateError(
            f"The {where} does not parse (line {error.lineno}): {error.message}."
        ) from None
    _refuse_unsafe(tree, where)
    try:
        variables = frozenset(meta.find_undeclared_variables(tree))
        template = environment.from_string(_bound_loops(tree))
    except TemplateError as error:  # an unknown filter or test, found when compiling
        raise PromptTemplateError(_sentence(f"The {where} does not compile", error)) from None
    return CompiledTemplate(source, variables, template, where)


def _refuse_unsafe(tree: nodes.Template, where: str) -> None:
    from jinja2 import nodes

    for node in tree.find_all(nodes.Node):
        kind = type(node).__name__
        if kind in _REFUSED_STATEMENTS:
            raise PromptTemplateError(
                f"The {where} uses '{kind.lower()}', which prompts do not allow."
            )
        name = _reached_name(node)
        if name is not None and (name.startswith("_") or name in ("self", _GUARD)):
            raise PromptTemplateError(
                f"The {where} reaches for '{name}'; names starting with '_' and 'self' are refused."
            )


def _reached_name(node: nodes.Node) -> str | None:
    from jinja2 import nodes

    if isinstance(node, nodes.Name):
        return str(node.name)
    if isinstance(node, nodes.Getattr):
        return str(node.attr)
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        return str(node.arg.value) if isinstance(node.arg.value, str) else None
    return None


def _bound_loops(tree: nodes.Template) -> nodes.Template:
    """Route every `{% for %}` and `~` through the render's `_RenderGuard`."""
    from jinja2 import nodes
    from jinja2.visitor import NodeTransformer

    def guard(method: str, args: list[nodes.Expr]) -> nodes.Call:
        target = nodes.Getattr(nodes.Name(_GUARD, "load"), method, "load")
        return nodes.Call(target, args, [], None, None)

    class Guarded(NodeTransformer):
        # jinja2's visitor dispatches on `visit_<NodeClass>`
        def visit_For(self, node: nodes.For) -> nodes.Node:  # noqa: N802
            self.generic_visit(node)
            node.iter = guard("take", [cast("nodes.Expr", node.iter)])
            return node

        def visit_Concat(self, node: nodes.Concat) -> nodes.Node:  # noqa: N802
            self.generic_visit(node)
            return guard("concat", list(node.nodes))

    guarded = Guarded().visit(tree)
    guarded.set_environment(_shared_environment())
    return guarded


def _sentence(prefix: str, error: BaseException) -> str:
    message = getattr(error, "message", None) or str(error)
    detail = " ".join(message.split()) or type(error).__name__
    return f"{prefix}: {detail.rstrip('.')}."
