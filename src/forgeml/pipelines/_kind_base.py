"""What every step kind shares: the job it runs (`JobCall`), the `StepKind` interface, and
the helpers kinds use to digest their inputs (see `kinds.py` for the registry)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from forgeml.core.artifacts import file_digest
from forgeml.core.errors import NotFoundError
from forgeml.pipelines.steps import StepBase

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

STEP_MODULE = "forgeml.pipelines.job"  # runs command and data steps (`job.py`)
# fields that say how a step is scheduled, not what it computes: never in its key
SCHEDULING_FIELDS = frozenset({"name", "needs", "retries", "timeout", "env"})


@dataclass(frozen=True)
class JobCall:
    """The job a step runs: `python -m MODULE SPEC_JSON`, of scheduler kind `job_kind`;
    `resources` is what each of its `workers` asks for (None: the scheduler's default, 1
    CPU and 1 GB); a job of several workers is one gang, as `forgeml train` submits it."""

    module: str
    spec: dict[str, Any]
    job_kind: str
    env: dict[str, str] = field(default_factory=dict)
    resources: dict[str, float] | None = None
    workers: int = 1


def model_job_resources(workspace: Workspace, workers: int = 1) -> dict[str, float]:
    """What each worker of a job that trains or scores a model asks for: what `forgeml
    train` asks for (4 GB or a share of what there is, a GPU each when there are enough),
    not a command's 1 GB."""
    from forgeml.scheduler.submit import JobOptions, job_resources

    return job_resources(workspace, JobOptions(), workers=workers)


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


@runtime_checkable
class CheckedKind(Protocol):
    """A kind whose step names files that can be checked when the pipeline is loaded."""

    def check(self, step: StepBase, base: Path) -> None:
        """Check what the step's own files say (a config file's sections), before anything
        is recorded; a step whose files are named by other steps' outputs is left alone.

        Raises:
            ForgemlError: the step cannot run as written (one sentence naming the file).
        """
        ...


def step_path(base: Path, name: str) -> Path:
    return (base / name).resolve()


def file_input(base: Path, step: StepBase, name: str) -> str:
    path = step_path(base, name)
    if not path.is_file():
        raise NotFoundError(f"Step '{step.name}' reads {name}, which does not exist.")
    return file_digest(path)


def params_of(step: StepBase) -> dict[str, Any]:
    """The step's parameters as its key sees them (without its scheduling fields)."""
    return step.model_dump(mode="json", exclude=set(SCHEDULING_FIELDS))
