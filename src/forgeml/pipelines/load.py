"""Read a pipeline file: overrides, kinds, names, references and cycles, or one sentence.

Everything is checked here, before anything is recorded: an error names the file, the
step and the key, and the store is untouched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from forgeml.core.configfile import load_yaml
from forgeml.core.errors import ConfigError, ForgemlError, UsageError
from forgeml.pipelines import _refs, graph
from forgeml.pipelines.kinds import KINDS, SCHEDULING_FIELDS, CheckedKind, get_kind
from forgeml.pipelines.steps import PipelineSpec, StepBase


@dataclass(frozen=True)
class Pipeline:
    """A validated pipeline: its spec, where it came from, and its DAG."""

    spec: PipelineSpec
    file: Path
    needs: dict[str, list[str]]  # step -> the steps it needs, in file order
    order: list[str]  # a run order (dependencies first)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def base(self) -> Path:
        """Relative paths in the file are relative to its folder."""
        return self.file.parent

    def step(self, name: str) -> StepBase:
        return next(step for step in self.spec.steps if step.name == name)

    @property
    def kinds(self) -> dict[str, str]:
        return {step.name: step.kind for step in self.spec.steps}

    def up_to(self, name: str) -> Pipeline:
        """The steps `name` needs, directly or not, and `name` itself: what one task of an
        exported workflow runs (the steps before it come from the cache).

        Raises:
            UsageError: the pipeline has no step `name`.
        """
        if name not in self.needs:
            steps = ", ".join(self.needs)
            raise UsageError(f"There is no step '{name}' in {self.file.name} (its steps: {steps}).")
        wanted = graph.ancestors(self.needs, name) | {name}
        spec = self.spec.model_copy(
            update={"steps": [step for step in self.spec.steps if step.name in wanted]}
        )
        needs = {step: before for step, before in self.needs.items() if step in wanted}
        order = [step for step in self.order if step in wanted]
        return Pipeline(spec, self.file, needs, order)


def load_pipeline(path: str | Path, overrides: Sequence[str] = ()) -> Pipeline:
    """Read, override and validate the pipeline file at `path`.

    Raises:
        ConfigError: the file is invalid (its sentence names the file, step and key).
        UsageError: an override is not `key.path=value` or names no key of the file.
    """
    file = Path(path).resolve()
    source = str(path)
    data = load_yaml(file)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a pipeline file is a mapping with `name` and `steps`.")
    for item in overrides:
        _apply_override(data, item)
    _check_steps(data.get("steps"), source)
    spec = _parse(data, source)
    needs = _needs(spec, source)
    cycle = graph.find_cycle(needs)
    if cycle:
        raise ConfigError(f"{source}: the steps form a cycle: {' -> '.join(cycle)}.")
    _check_files(spec, file.parent, source)
    return Pipeline(spec, file, needs, graph.topological_order(needs))


def recorded_pipeline(spec: dict[str, Any], file: str) -> Pipeline:
    """The pipeline a run recorded (its spec as run, overrides applied), for drawing it."""
    parsed = PipelineSpec.model_validate(spec)
    needs = _needs(parsed, file)
    return Pipeline(parsed, Path(file), needs, graph.topological_order(needs))


def _apply_override(data: dict[str, Any], item: str) -> None:
    """`params.lr=0.1` or `steps.NAME.key.path=value` (values parsed as YAML)."""
    path, sep, raw = item.partition("=")
    if not sep or not path:
        raise UsageError(f"--set '{item}' is not of the form key.path=value.")
    node: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        if isinstance(node, list):  # the steps: chosen by name
            found = [s for s in node if isinstance(s, dict) and s.get("name") == key]
            if not found:
                raise UsageError(f"--set '{item}': there is no step '{key}'.")
            node = found[0]
            continue
        child = node.setdefault(key, {})
        if not isinstance(child, dict | list):
            raise UsageError(f"--set '{item}': '{key}' is not a section of the pipeline.")
        node = child
    if isinstance(node, list):
        raise UsageError(f"--set '{item}': name a key of a step, not a whole step.")
    node[keys[-1]] = yaml.safe_load(raw)


def _check_steps(steps: Any, source: str) -> None:
    """Kinds and names, checked on the raw file so the sentence can name the step."""
    if not isinstance(steps, list):
        return  # the model says what is wrong
    seen: dict[str, int] = {}
    for position, step in enumerate(steps, start=1):
        if not isinstance(step, dict):
            continue
        name = step.get("name", f"#{position}")
        kind = step.get("kind")
        if kind not in KINDS:
            known = ", ".join(sorted(KINDS))
            raise ConfigError(
                f"{source}: step '{name}': key 'kind': unknown step kind {kind!r} (known: {known})."
            )
        if name in seen:
            raise ConfigError(
                f"{source}: step '{name}' is defined twice (steps {seen[name]} and {position})."
            )
        seen[name] = position


def _parse(data: dict[str, Any], source: str) -> PipelineSpec:
    try:
        return PipelineSpec.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_describe(error, data, source)) from None


def _describe(error: ValidationError, data: dict[str, Any], source: str) -> str:
    first = error.errors()[0]
    loc = list(first["loc"])
    where = source
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        step = data["steps"][loc[1]]
        name = step.get("name", f"#{loc[1] + 1}") if isinstance(step, dict) else f"#{loc[1] + 1}"
        where = f"{source}: step '{name}'"
        loc = loc[3:] if len(loc) > 2 and loc[2] in KINDS else loc[2:]
    key = ".".join(str(part) for part in loc)
    message = first["msg"].removeprefix("Value error, ")
    if not key:  # a rule over several keys of the step
        return f"{where}: {message}."
    if first["type"] == "extra_forbidden":
        return f"{where}: unknown key '{key}'."
    if first["type"] == "missing":
        return f"{where}: missing required key '{key}'."
    return f"{where}: key '{key}': {message} (got {first.get('input')!r})."


def _needs(spec: PipelineSpec, source: str) -> dict[str, list[str]]:
    """Each step's dependencies: its explicit `needs` and the steps its references name."""
    steps = {step.name: step for step in spec.steps}
    needs: dict[str, list[str]] = {}
    for step in spec.steps:
        where = f"{source}: step '{step.name}'"
        wanted = list(step.needs)
        for name in wanted:
            if name not in steps:
                raise ConfigError(f"{where}: key 'needs': there is no step '{name}'.")
        body = step.model_dump(mode="json", exclude=set(SCHEDULING_FIELDS) | {"kind"})
        try:
            found = list(_refs.references(body))
        except _refs.ReferenceSyntaxError as error:
            raise ConfigError(f"{where}: {error}.") from None
        for key, reference in found:
            _check_reference(spec, steps, reference, f"{where}: key '{key}'")
            if reference.scope == "steps" and reference.name not in wanted:
                wanted.append(reference.name)
        needs[step.name] = wanted
    return needs


def _check_files(spec: PipelineSpec, base: Path, source: str) -> None:
    """What each step's own files say (a tune config's `search`), checked now, with the
    file's parameters in place, rather than when the step's turn comes."""
    for step in spec.steps:
        kind = get_kind(step.kind)
        if not isinstance(kind, CheckedKind):
            continue
        fields = _refs.substitute_params(step.model_dump(mode="json"), spec.params)
        try:
            kind.check(type(step).model_validate(fields), base)
        except ValidationError as error:  # a parameter's value does not fit its key
            first = error.errors()[0]
            key = ".".join(str(part) for part in first["loc"])
            raise ConfigError(
                f"{source}: step '{step.name}': key '{key}' with the file's params in place: "
                f"{first['msg']}."
            ) from None
        except ForgemlError as error:
            raise ConfigError(f"{source}: step '{step.name}': {error}") from None


def _check_reference(
    spec: PipelineSpec, steps: Mapping[str, StepBase], reference: _refs.Reference, where: str
) -> None:
    if reference.scope == "params":
        if reference.name not in spec.params:
            known = ", ".join(sorted(spec.params)) or "none"
            raise ConfigError(
                f"{where}: {reference.text} names no parameter (the file's params: {known})."
            )
        return
    upstream = steps.get(reference.name)
    if upstream is None:
        raise ConfigError(f"{where}: {reference.text} refers to an unknown step.")
    outputs = get_kind(upstream.kind).outputs(upstream)
    if reference.output not in outputs:
        known = ", ".join(sorted(outputs)) or "none"
        raise ConfigError(
            f"{where}: {reference.text}: step '{reference.name}' has no output "
            f"'{reference.output}' (its outputs: {known})."
        )
