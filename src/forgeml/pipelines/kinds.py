"""Step kinds: what each kind outputs, which inputs its key digests, and its job.

One record per kind in an explicit registry (the shape of `scheduler/executors`): the
loader checks references against `outputs`, the cache key reads `inputs`, and the runner
submits `job` through the scheduler's job contract. Domain packages are imported inside
the methods that need them, so validating a pipeline loads no trainer and no data layer.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ConfigError
from forgeml.pipelines._kind_base import (
    SCHEDULING_FIELDS,
    STEP_MODULE,
    CheckedKind,
    JobCall,
    StepKind,
    file_input,
    params_of,
    step_path,
)
from forgeml.pipelines.model_kinds import MODEL_KINDS, training_inputs, training_job
from forgeml.pipelines.release_kinds import EFFECT_KINDS, RELEASE_KINDS
from forgeml.pipelines.steps import (
    CommandStep,
    DataStep,
    OptimizeStep,
    StepBase,
    StreamStep,
    TrainStep,
)

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace


class CommandKind:
    name = "command"

    def outputs(self, step: StepBase) -> frozenset[str]:
        assert isinstance(step, CommandStep)
        return frozenset(step.outputs)

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        assert isinstance(step, CommandStep)
        return {f"file:{name}": file_input(base, step, name) for name in step.reads}

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        # the program runs in the pipeline file's folder: its relative paths mean the same
        spec = {"kind": self.name, "step": step.model_dump(mode="json"), "cwd": str(base)}
        return JobCall(STEP_MODULE, spec, "command")


class DataKind:
    name = "data"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"dataset", "digest", "rows"})

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        assert isinstance(step, DataStep)
        if step.add is not None:
            return {f"file:{step.add}": file_input(base, step, step.add)}
        from forgeml.data import catalog

        with workspace.store.session() as session:
            version = catalog.resolve(session, step.dataset)
        return {f"dataset:{step.dataset}": version.digest}

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        assert isinstance(step, DataStep)
        fields = step.model_dump(mode="json")
        if step.add is not None:
            fields["add"] = str(step_path(base, step.add))
        return JobCall(STEP_MODULE, {"kind": self.name, "step": fields}, "data")


class StreamKind:
    """A stream window: its outputs are a data step's; what it reads is whatever came since
    the last window, which no key can digest, so it is never cached (`UNCACHED_KINDS`)."""

    name = "stream"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"dataset", "digest", "rows"})

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        return {}

    def check(self, step: StepBase, base: Path) -> None:
        from forgeml.data.streams import check_stream_url

        assert isinstance(step, StreamStep)
        if step.password_env is not None and step.password_env not in step.env:
            raise ConfigError(
                f"Step '{step.name}': password_env {step.password_env} is not in its env "
                "list, so its job would not receive it; add it to env."
            )
        if "${" in step.url:  # an upstream step's output: checked when it is known
            return
        if check_stream_url(step.url).password is not None:
            raise ConfigError(
                f"Step '{step.name}': its URL holds a password, which the pipeline's records "
                "would keep; put it in an environment variable named by password_env (and "
                "listed in env)."
            )

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        return JobCall(
            STEP_MODULE, {"kind": self.name, "step": step.model_dump(mode="json")}, "data"
        )


class TrainKind:
    name = "train"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"model", "run_id"})

    def _config(self, workspace: Workspace, step: StepBase, base: Path) -> Any:
        from forgeml.train.config import load_config

        assert isinstance(step, TrainStep)
        overrides = list(step.overrides)
        if step.reproduce is not None:
            from forgeml.tracking.reproduce import reproduce_config

            return reproduce_config(workspace, step.reproduce, step.data, overrides)
        assert step.config is not None  # the model holds exactly one of the two
        if step.data is not None:
            overrides.append(f"data.dataset={step.data}")
        return load_config(str(step_path(base, step.config)), overrides)

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        assert isinstance(step, TrainStep)
        config = self._config(workspace, step, base)
        return training_inputs(workspace, step, config, base, step.config)

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        return training_job(workspace, self._config(workspace, step, base), "train")


class OptimizeKind:
    name = "optimize"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"model", "parent", "run_id"})

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        from forgeml.tracking.registry import get_model_version

        assert isinstance(step, OptimizeStep)
        return {f"model:{step.model}": get_model_version(workspace, step.model).artifact_digest}

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        from forgeml.optimize.job import OPTIMIZE_MODULE, OptimizeJobSpec
        from forgeml.optimize.pipeline import OptimizeRequest

        assert isinstance(step, OptimizeStep)
        try:
            request = OptimizeRequest(mode=step.mode, **step.options)
        except TypeError:
            raise ConfigError(
                f"Step '{step.name}': options {sorted(step.options)} are not all "
                "optimisation options (tolerance, sparsity, finetune_steps, per_channel, ...)."
            ) from None
        request.check()
        spec = OptimizeJobSpec(model_ref=step.model, request=asdict(request))
        return JobCall(OPTIMIZE_MODULE, spec.model_dump(mode="json"), "optimize")


KINDS: dict[str, StepKind] = {}
# never taken from the cache nor recorded in it: each run runs them
UNCACHED_KINDS = EFFECT_KINDS | {StreamKind.name}


def register_kind(kind: StepKind) -> None:
    """Make `kind` available to pipeline files under `kind.name`."""
    KINDS[kind.name] = kind


def get_kind(name: str) -> StepKind:
    """The registered kind `name` (the loader has checked that it exists)."""
    return KINDS[name]


for _kind in (
    CommandKind(),
    DataKind(),
    StreamKind(),
    TrainKind(),
    *MODEL_KINDS,
    OptimizeKind(),
    *RELEASE_KINDS,
):
    register_kind(_kind)

__all__ = [
    "SCHEDULING_FIELDS",
    "STEP_MODULE",
    "UNCACHED_KINDS",
    "CheckedKind",
    "JobCall",
    "StepKind",
    "params_of",
]
