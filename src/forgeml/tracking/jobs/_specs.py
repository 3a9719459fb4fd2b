"""What a train or tune job is given, what it does with it, and how it is submitted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forgeml.scheduler.contract import JobContext, JobPreempted, Outcome

if TYPE_CHECKING:
    from forgeml.core.store import JobRecord
    from forgeml.core.workspace import Workspace
    from forgeml.scheduler.contract import JobResult
    from forgeml.scheduler.submit import JobOptions, Output
    from forgeml.tracking.runner import Progress, RunSummary

TRAIN_MODULE = "forgeml.tracking.jobs.train"
TUNE_MODULE = "forgeml.tracking.jobs.tune"


class TrainJobSpec(BaseModel):
    """A training job: a validated config (or none, to resume `resume` with its own)."""

    model_config = ConfigDict(extra="forbid")

    config: dict[str, Any] | None = Field(default=None, description="A TrainConfig, as JSON.")
    resume: str | None = Field(default=None, description="Continue this run.")


class TuneJobSpec(BaseModel):
    """A study: the tune config file, how many trials, and `--set` overrides."""

    model_config = ConfigDict(extra="forbid")

    config_path: str
    trials: int = 10  # the study itself refuses fewer than 1
    overrides: list[str] = Field(default_factory=list)
    study: str | None = Field(
        default=None,
        description="The Optuna study (default: the config's name + '-study', continued "
        "by each run); a pipeline step names one per distinct search.",
    )
    require_model: bool = Field(
        default=False,
        description="Fail when no trial completed, so there is no best model (a pipeline's "
        "later steps need one).",
    )


def run_payload(summary: RunSummary) -> dict[str, Any]:
    """A run's outputs: its id, status, steps, final metrics and registered model."""
    return {
        "run_id": summary.run_id,
        "status": summary.status,
        "steps": summary.steps,
        "metrics": summary.metrics,
        "model": f"{summary.model.name}@v{summary.model.version}" if summary.model else None,
    }


def _resumable(context: JobContext | None) -> str | None:
    """The run an earlier, preempted attempt of this job left to continue."""
    previous = context.previous_result() if context is not None else None
    if previous is None or previous.outcome != Outcome.PREEMPTED:
        return None
    run_id = previous.outputs.get("run_id")
    return str(run_id) if run_id else None


def train_job(
    workspace: Workspace,
    spec: TrainJobSpec,
    context: JobContext | None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Train (or resume) as `spec` says; returns the run's outputs.

    Raises:
        JobPreempted: SIGTERM stopped the run after a checkpoint; resumable.
        ForgemlError: the run failed (recorded FAILED first).
    """
    from forgeml.core.errors import UsageError
    from forgeml.tracking.runner import run_training
    from forgeml.tracking.runs import get_run
    from forgeml.train.config import TrainConfig

    resume = spec.resume or _resumable(context)
    if spec.config is not None:
        config = TrainConfig.model_validate(spec.config)
    elif resume is not None:
        config = TrainConfig.model_validate(get_run(workspace, resume).config)
    else:
        raise UsageError("Give a CONFIG file, or --resume RUN to continue a run.")
    summary = run_training(workspace, config, resume=resume, progress=progress)
    outputs = run_payload(summary)
    if summary.preempted:
        raise JobPreempted(outputs)
    return outputs


def tune_job(workspace: Workspace, spec: TuneJobSpec) -> dict[str, Any]:
    """Run the study `spec` names; returns its summary (best trial, its run and model).

    Raises:
        ConfigError: the config is invalid, or `require_model` and no trial completed.
    """
    from forgeml.core.errors import ConfigError
    from forgeml.tracking.tuning import run_tuning

    result = run_tuning(workspace, spec.config_path, spec.trials, spec.overrides, spec.study)
    if spec.require_model and result["model"] is None:
        states = ", ".join(sorted({str(t["state"]) for t in result["trials"]})) or "none"
        raise ConfigError(
            f"Study {result['study']}: no trial completed (trial states: {states}), so there "
            "is no best model; widen the search space or run more trials."
        )
    return result


def submit_training(
    workspace: Workspace,
    spec: TrainJobSpec,
    *,
    name: str,
    workers: int = 1,
    kind: Literal["train", "finetune"] = "train",
    options: JobOptions | None = None,
    output: Output | None = None,
) -> tuple[JobRecord, JobResult | None]:
    """Run `spec` as a scheduler job; the job and its result (None while queued).

    Raises:
        ForgemlError: the job failed; the run's own error class and sentence.
    """
    from forgeml.scheduler.submit import run_entry_point

    return run_entry_point(
        workspace,
        TRAIN_MODULE,
        spec.model_dump(mode="json"),
        kind=kind,
        name=name,
        workers=workers,
        options=options,
        output=output,
    )


def submit_tuning(
    workspace: Workspace,
    spec: TuneJobSpec,
    *,
    name: str,
    options: JobOptions | None = None,
    output: Output | None = None,
) -> tuple[JobRecord, JobResult | None]:
    """Run the study `spec` as a scheduler job; the job and its result (None while queued)."""
    from forgeml.scheduler.submit import run_entry_point

    return run_entry_point(
        workspace,
        TUNE_MODULE,
        spec.model_dump(mode="json"),
        kind="tune",
        name=name,
        options=options,
        output=output,
    )
