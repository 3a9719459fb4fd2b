"""`forgeml tune`: an Optuna study whose trials are tracked child runs of a study run.

The study run and each trial run end by `tracked_run`'s rules: SIGTERM stops the trial
at a checkpoint (KILLED), then the study (KILLED); a failure fails the study.

The tune config is a training config plus two sections:

    tune: {metric: accuracy, direction: maximize, sampler: tpe, pruner: median, register_best: true}
    search:
      optimizer.lr: {type: loguniform, low: 1.0e-4, high: 1.0e-2}
      model.params.dropout: {type: float, low: 0.0, high: 0.5}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from forgeml.core.configfile import load_yaml, parse_model
from forgeml.core.errors import ConfigError
from forgeml.tracking.lifecycle import RunStopped, tracked_run
from forgeml.tracking.registry import register_model
from forgeml.tracking.runner import dataset_version_for, run_dir_for, run_training
from forgeml.tracking.runs import attach_run, get_run, start_run

if TYPE_CHECKING:
    import optuna

    from forgeml.core.workspace import Workspace
    from forgeml.train.config import TrainConfig
    from forgeml.train.hpo import SearchSpace


class TuneOptions(BaseModel):
    """The `tune` section of a tune config."""

    model_config = ConfigDict(extra="forbid")

    metric: str = Field(default="loss", description="Final eval metric to optimise.")
    direction: Literal["minimize", "maximize"] = Field(
        default="minimize", description="Whether the metric is to be minimised."
    )
    sampler: Literal["tpe", "random"] = Field(default="tpe", description="Optuna sampler.")
    pruner: Literal["median", "asha", "none"] = Field(
        default="median", description="Stop unpromising trials on their training loss curve."
    )
    seed: int = Field(default=0, ge=0, description="Sampler seed.")
    register_best: bool = Field(default=True, description="Register the best trial's model.")


def read_tune_config(
    path: str, overrides: list[str]
) -> tuple[dict[str, Any], SearchSpace, TuneOptions]:
    """The tune config at `path` split into its training part (`overrides` applied), its
    search space and its `tune` options.

    Raises:
        ConfigError: the file is not a mapping, lacks `search`, or a section is invalid.
    """
    from forgeml.train.config import apply_overrides
    from forgeml.train.hpo import SearchSpace

    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level.")
    options = parse_model(TuneOptions, data.pop("tune", None) or {}, f"{path}: tune")
    if "search" not in data:
        raise ConfigError(f"{path}: missing required key 'search' (the parameters to tune).")
    space = SearchSpace.parse({"params": data.pop("search")}, f"{path}: search")
    return apply_overrides(data, overrides), space, options


def _trial_config(base: dict[str, Any], params: dict[str, Any], path: str) -> TrainConfig:
    from forgeml.train.config import TrainConfig, apply_overrides
    from forgeml.train.hpo import to_overrides

    merged = apply_overrides(_deep_copy(base), to_overrides(params))
    merged["register_model"] = False
    return parse_model(TrainConfig, merged, f"{path} (trial {params})")


def _deep_copy(data: dict[str, Any]) -> dict[str, Any]:
    import copy

    return copy.deepcopy(data)


def _best_run(
    workspace: Workspace, study: str, runs: dict[int, str], best_trial: int | None
) -> str | None:
    """The run of the best trial, also when it ran in an earlier call of a continued study."""
    if best_trial is None:
        return None
    if best_trial in runs:
        return runs[best_trial]
    import optuna

    from forgeml.train.hpo import optuna_storage

    stored = optuna.load_study(
        study_name=study, storage=optuna_storage(workspace.settings.database_url)
    )
    run_id = stored.trials[best_trial].user_attrs.get("run_id")
    return str(run_id) if run_id else None


def run_tuning(
    workspace: Workspace,
    path: str,
    trials: int,
    overrides: list[str],
    study_name: str | None = None,
) -> dict[str, Any]:
    """Run the study of tune config `path`; returns a JSON summary with the best trial.

    The Optuna study is `study_name` (default: the config's name + "-study"); a study of
    that name that exists already is continued.
    """
    import optuna

    from forgeml.train.config import TrainConfig
    from forgeml.train.hpo import tune

    # failed trials surface as forgeml's own one-sentence error, not Optuna's traceback
    optuna.logging.set_verbosity(optuna.logging.CRITICAL)
    base, space, options = read_tune_config(path, overrides)
    template = parse_model(TrainConfig, _deep_copy(base), path)
    study_run = start_run(
        workspace,
        {"train": base, "search": space.model_dump(mode="json"), "tune": options.model_dump()},
        f"{template.name}-study",
        dataset_version_for(workspace, template),
    )
    runs: dict[int, str] = {}
    sign = 1.0 if options.direction == "minimize" else -1.0

    def objective(params: dict[str, Any], trial: optuna.Trial) -> float:
        import optuna

        def report(step: int, _total: int, metrics: dict[str, float]) -> None:
            # prune on the training-loss curve, oriented to the study's direction
            if "train_loss" in metrics:  # the trainer's step metrics (train/loop.py)
                trial.report(sign * metrics["train_loss"], step)
                if trial.should_prune():
                    raise optuna.TrialPruned(f"pruned by the study's pruner at step {step}")

        from forgeml.train.loop import TrainingDivergedError

        try:
            summary = run_training(
                workspace,
                _trial_config(base, params, path),
                progress=report,
                parent_run_id=study_run.run_id,
            )
        except TrainingDivergedError:
            # a diverging trial is a bad region of the space, not a reason to stop the study
            raise optuna.TrialPruned("pruned: the training loss diverged") from None
        if summary.preempted:  # SIGTERM reached the trial: it saved and stopped, so do we
            raise RunStopped(f"stopped by SIGTERM during trial {trial.number}")
        runs[trial.number] = summary.run_id
        trial.set_user_attr("run_id", summary.run_id)
        if options.metric not in summary.metrics:
            raise ConfigError(
                f"Metric '{options.metric}' is not among the run's final metrics "
                f"({', '.join(sorted(summary.metrics))})."
            )
        return float(summary.metrics[options.metric])

    with tracked_run(study_run) as study:
        result = tune(
            objective,
            space,
            n_trials=trials,
            storage_url=workspace.settings.database_url,
            study_name=study_name or f"{template.name}-study",
            direction=options.direction,
            sampler=options.sampler,
            pruner=options.pruner,
            seed=options.seed,
        )
        best_run = _best_run(workspace, result.study_name, runs, result.best_trial)
        model = None
        if best_run is not None and options.register_best:
            record = register_model(
                workspace,
                attach_run(workspace, best_run),
                template.name,
                run_dir_for(workspace, best_run) / "bundle",
                metrics=get_run(workspace, best_run).metrics,
            )
            model = f"{record.name}@v{record.version}"
        study.finish({f"best_{options.metric}": result.best_value})
    return {
        "study": result.study_name,
        "study_run": study_run.run_id,
        "metric": options.metric,
        "best_value": result.best_value,
        "best_params": result.best_params,
        "best_run": best_run,
        "model": model,
        "trials": [
            {"number": t.number, "state": t.state, "value": t.value, "params": t.params}
            for t in result.trials
        ],
    }
