"""`python -m forgeml.pipelines.evaluate SPEC_JSON`: an evaluate step as a scheduler job, and
the scoring the release gate shares with it.

`score_model` scores a model version on one dataset version's split exactly as the gate
compares two (`optimize.score_on_split`: the rows encoded as the model's own training
encoded them, its FeatureSpec pinned by the digest its bundle holds), overall and per
value of each slice column ("accuracy/sex=Male"). `metric_value` picks the metric that
decides, or names the ones there are.

An evaluate step records what it scored as a run of the `evaluate` experiment (params: the
model, the data, the split; metrics: every score), read later with `forgeml runs show`;
the run is opened only once the scores are in, so a failed evaluation records nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from forgeml.core.errors import ConfigError
from forgeml.pipelines.steps import EvaluateStep
from forgeml.scheduler.contract import JobContext, run_job, spec_argument

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace

EVALUATE_MODULE = "forgeml.pipelines.evaluate"
EXPERIMENT = "evaluate"  # every evaluation run, whatever model it scored


class EvaluateJobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: dict[str, Any]


@dataclass(frozen=True)
class Scores:
    """A model version's metrics on one split of one dataset version."""

    model: str  # NAME@vN
    data: str | None  # the dataset version's reference (None: none is recorded)
    split: str
    metrics: dict[str, float]

    @property
    def where(self) -> str:
        return f"on {self.data or 'its training data'} ({self.split})"


def training_data(record: ModelVersionRecord, who: str) -> str:
    """The reference of the dataset version `record` was trained on.

    Raises:
        ConfigError: the version records none (`who` names the step in the sentence).
    """
    if record.dataset_version is None:
        raise ConfigError(
            f"{who}: {record.ref} records no training dataset version; name one with `data:`."
        )
    return record.dataset_version.ref


def score_model(
    workspace: Workspace, ref: str, data: str | None, split: str, slices: list[str]
) -> Scores:
    """Metrics of model version `ref` on `split` of `data` (default: the dataset version it
    was trained on; for a version that records none, its training config's data).

    Raises:
        NotFoundError: an unknown model or dataset version.
        UsageError: a split the data lacks.
    """
    from forgeml.optimize import score_on_split
    from forgeml.tracking import get_model_version

    record = get_model_version(workspace, ref)
    if data is None and record.dataset_version is not None:
        data = record.dataset_version.ref
    metrics = score_on_split(workspace, record.ref, data, split, slices)
    return Scores(record.ref, data, split, metrics)


def metric_value(scores: Scores, metric: str, who: str) -> float:
    """The `metric` of `scores`.

    Raises:
        ConfigError: the model's scorer gives no such metric (the sentence names those it
            gives).
    """
    value = scores.metrics.get(metric)
    if value is None:
        known = ", ".join(sorted(k for k in scores.metrics if "/" not in k)) or "none"
        raise ConfigError(
            f"{who}: {scores.model} has no metric '{metric}' {scores.where} (its metrics: {known})."
        )
    return value


def run_evaluate(workspace: Workspace, step: EvaluateStep) -> dict[str, Any]:
    """Score the step's model, record the scores as a run; the step's outputs.

    Raises:
        NotFoundError: an unknown model or dataset version.
        ConfigError: `metric` is not one the model's scorer gives, or a slice column gives
            no per-slice scores.
        UsageError: a split the data lacks.
    """
    from forgeml.data import catalog
    from forgeml.tracking import get_model_version, start_run
    from forgeml.tracking.lifecycle import tracked_run

    who = f"Step '{step.name}'"
    data = step.data or training_data(get_model_version(workspace, step.model), who)
    scores = score_model(workspace, step.model, data, step.split, step.slices)
    score = metric_value(scores, step.metric, who)
    prefixes = {column: f"{step.metric}/{column}=" for column in step.slices}
    missing = [c for c, p in prefixes.items() if not any(k.startswith(p) for k in scores.metrics)]
    if missing:
        raise ConfigError(
            f"{who}: {scores.model} gives no per-slice '{step.metric}' for "
            f"{', '.join(missing)} {scores.where} (is it a column of the data?)."
        )
    record = get_model_version(workspace, scores.model)
    with workspace.store.session() as session:
        version = catalog.resolve(session, scores.data) if scores.data else None
    params = {
        "evaluate": {
            "model": scores.model,
            "model_digest": record.artifact_digest,
            "data": scores.data,
            "split": step.split,
            "metric": step.metric,
            "slices": step.slices,
        }
    }
    handle = start_run(
        workspace,
        params,
        f"{record.name}-eval",
        version,
        lease_seconds=workspace.settings.run_lease_seconds,
        experiment=EXPERIMENT,
    )
    with tracked_run(handle) as run:
        run.finish(scores.metrics)
    return {
        "model": scores.model,
        "dataset": scores.data,
        "split": step.split,
        "metric": step.metric,
        "score": score,
        "metrics": scores.metrics,
        "run_id": handle.run_id,
    }


def _body(_context: JobContext | None) -> dict[str, Any]:
    from forgeml.core.workspace import open_workspace

    spec = EvaluateJobSpec.model_validate(spec_argument())
    workspace = open_workspace()
    try:
        return run_evaluate(workspace, EvaluateStep.model_validate(spec.step))
    finally:
        workspace.close()


if __name__ == "__main__":
    run_job(_body)
