"""Step kinds: what each kind outputs, which inputs its key digests, and its job.

One record per kind in an explicit registry (the shape of `scheduler/executors`): the
loader checks references against `outputs`, the cache key reads `inputs`, and the runner
submits `job` through the scheduler's job contract. Domain packages are imported inside
the methods that need them, so validating a pipeline loads no trainer and no data layer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from forgeml.core.artifacts import file_digest
from forgeml.core.errors import ConfigError, NotFoundError
from forgeml.pipelines.steps import CommandStep, DataStep, OptimizeStep, StepBase, TrainStep

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

STEP_MODULE = "forgeml.pipelines.job"  # runs command and data steps (`job.py`)
# fields that say how a step is scheduled, not what it computes: never in its key
SCHEDULING_FIELDS = frozenset({"name", "needs", "retries", "timeout", "env"})


@dataclass(frozen=True)
class JobCall:
    """The job a step runs: `python -m MODULE SPEC_JSON`, of scheduler kind `job_kind`."""

    module: str
    spec: dict[str, Any]
    job_kind: str
    env: dict[str, str] = field(default_factory=dict)


class StepKind(Protocol):
    """One kind of step (see `steps.py` for its spec model)."""

    name: str

    def outputs(self, step: StepBase) -> frozenset[str]:
        """The names `${steps.NAME.OUTPUT}` may use; known before the step runs."""
        ...

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        """Digests of what the step reads (files, dataset and model versions).

        Raises:
            ForgemlError: an input is missing (one sentence naming it).
        """
        ...

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        """The job that runs the (resolved) step."""
        ...


def _path(base: Path, name: str) -> Path:
    return (base / name).resolve()


def _file_input(base: Path, step: StepBase, name: str) -> str:
    path = _path(base, name)
    if not path.is_file():
        raise NotFoundError(f"Step '{step.name}' reads {name}, which does not exist.")
    return file_digest(path)


def params_of(step: StepBase) -> dict[str, Any]:
    """The step's parameters as its key sees them (without its scheduling fields)."""
    return step.model_dump(mode="json", exclude=set(SCHEDULING_FIELDS))


class CommandKind:
    name = "command"

    def outputs(self, step: StepBase) -> frozenset[str]:
        assert isinstance(step, CommandStep)
        return frozenset(step.outputs)

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        assert isinstance(step, CommandStep)
        return {f"file:{name}": _file_input(base, step, name) for name in step.reads}

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
            return {f"file:{step.add}": _file_input(base, step, step.add)}
        from forgeml.data import catalog

        with workspace.store.session() as session:
            version = catalog.resolve(session, step.dataset)
        return {f"dataset:{step.dataset}": version.digest}

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        assert isinstance(step, DataStep)
        fields = step.model_dump(mode="json")
        if step.add is not None:
            fields["add"] = str(_path(base, step.add))
        return JobCall(STEP_MODULE, {"kind": self.name, "step": fields}, "data")


class TrainKind:
    name = "train"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"model", "run_id"})

    def _config(self, step: StepBase, base: Path) -> Any:
        from forgeml.train.config import load_config

        assert isinstance(step, TrainStep)
        return load_config(str(_path(base, step.config)), list(step.overrides))

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        from forgeml.data import catalog

        assert isinstance(step, TrainStep)
        config = self._config(step, base)
        with workspace.store.session() as session:
            version = catalog.resolve(session, config.data.dataset)
        return {
            f"file:{step.config}": _file_input(base, step, step.config),
            f"dataset:{config.data.dataset}": version.digest,
        }

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        from forgeml.tracking.jobs import TRAIN_MODULE, TrainJobSpec

        config = self._config(step, base)
        spec = TrainJobSpec(config=config.model_dump(mode="json"))
        return JobCall(TRAIN_MODULE, spec.model_dump(mode="json"), "train")


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


def register_kind(kind: StepKind) -> None:
    """Make `kind` available to pipeline files under `kind.name`."""
    KINDS[kind.name] = kind


def get_kind(name: str) -> StepKind:
    """The registered kind `name` (the loader has checked that it exists)."""
    return KINDS[name]


for _kind in (CommandKind(), DataKind(), TrainKind(), OptimizeKind()):
    register_kind(_kind)
