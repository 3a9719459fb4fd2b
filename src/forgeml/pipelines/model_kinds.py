"""The model kinds besides train: finetune, tune and evaluate (see `kinds.py` for the registry).

finetune runs `forgeml finetune`'s job (the training entry point, scheduler kind
"finetune"); a pipeline refuses a finetune config with neither a `lora` nor a `distill`
section when it is loaded, where the CLI only notes that every weight will train: in a
pipeline nobody reads the note, and a step that trains every weight is a train step.
tune runs `forgeml tune`'s job over an Optuna study of its own: the study is named by a
digest of what the search reads (config, search space, data, trials), so a changed input
starts a fresh study rather than continuing one whose trials saw other data, while a
retried job continues its own. evaluate scores a model version as the gate does
(`evaluate.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from forgeml.core.errors import ConfigError
from forgeml.pipelines._kind_base import JobCall, file_input, model_job_resources, step_path
from forgeml.pipelines.steps import EvaluateStep, FinetuneStep, StepBase, TuneStep

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace
    from forgeml.tracking.tuning import TuneOptions
    from forgeml.train.config import TrainConfig
    from forgeml.train.hpo import SearchSpace


def _model_digest(workspace: Workspace, ref: str) -> str:
    from forgeml.tracking.registry import get_model_version

    return get_model_version(workspace, ref).artifact_digest


def _dataset_digest(workspace: Workspace, ref: str) -> str:
    from forgeml.data import catalog

    with workspace.store.session() as session:
        return catalog.resolve(session, ref).digest


def _overrides(step: FinetuneStep | TuneStep) -> list[str]:
    """The step's overrides, and its `data` as the one that names the dataset version."""
    extra = [f"data.dataset={step.data}"] if step.data is not None else []
    return [*step.overrides, *extra]


def _unresolved(step: FinetuneStep | TuneStep) -> bool:
    """Whether its config or overrides still hold a step's output (known at run time)."""
    return any("${" in text for text in (step.config, *step.overrides))


def training_inputs(
    workspace: Workspace, step: StepBase, config: TrainConfig, base: Path, file: str | None
) -> dict[str, str]:
    """What a training step's key digests: the resolved config (the whole recipe: a file
    edit, an override or a new champion changes it), its dataset version, its teacher's
    version (an alias that moves re-runs it), its config file (None: a reproduced run's)."""
    from forgeml.core.ids import json_digest

    found = {
        "config": json_digest(config.model_dump(mode="json")),
        f"dataset:{config.data.dataset}": _dataset_digest(workspace, config.data.dataset),
    }
    if file is not None:
        found[f"file:{file}"] = file_input(base, step, file)
    if config.distill is not None:
        teacher = config.distill.teacher
        found[f"model:{teacher}"] = _model_digest(workspace, teacher)
    return found


def training_job(workspace: Workspace, config: TrainConfig, job_kind: str) -> JobCall:
    """The job that trains `config` as `forgeml train|finetune` does: one gang of its
    `workers`, each asking what `forgeml train`'s workers ask for."""
    from forgeml.tracking.jobs import TRAIN_MODULE, TrainJobSpec

    spec = TrainJobSpec(config=config.model_dump(mode="json"))
    return JobCall(
        TRAIN_MODULE,
        spec.model_dump(mode="json"),
        job_kind,
        resources=model_job_resources(workspace, config.workers),
        workers=config.workers,
    )


class FinetuneKind:
    name = "finetune"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"model", "run_id"})

    def _config(self, step: StepBase, base: Path) -> TrainConfig:
        from forgeml.train.config import load_config

        assert isinstance(step, FinetuneStep)
        config = load_config(str(step_path(base, step.config)), _overrides(step))
        if config.lora is None and config.distill is None:
            raise ConfigError(
                f"{step.config} has neither a `lora` nor a `distill` section, so there is "
                "nothing to fine-tune through (kind: train trains every weight)."
            )
        return config

    def check(self, step: StepBase, base: Path) -> None:
        assert isinstance(step, FinetuneStep)
        if not _unresolved(step):
            self._config(step, base)

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        assert isinstance(step, FinetuneStep)
        config = self._config(step, base)
        return training_inputs(workspace, step, config, base, step.config)

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        return training_job(workspace, self._config(step, base), "finetune")


class TuneKind:
    name = "tune"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset(
            {"model", "study", "study_run", "best_run", "best_value", "best_params", "metric"}
        )

    def _read(self, step: StepBase, base: Path) -> tuple[SearchSpace, TuneOptions, TrainConfig]:
        """Its search space, its `tune` options and its training part (overrides applied).

        Raises:
            ConfigError: no `search` section, an invalid section, or a study that would
                register no best model.
        """
        from forgeml.core.configfile import parse_model
        from forgeml.tracking.tuning import read_tune_config
        from forgeml.train.config import TrainConfig

        assert isinstance(step, TuneStep)
        path = str(step_path(base, step.config))
        train, space, options = read_tune_config(path, _overrides(step))
        if not options.register_best:
            raise ConfigError(
                f"{path}: tune.register_best is false, but a tune step's output is the best "
                "trial's registered model."
            )
        return space, options, parse_model(TrainConfig, train, path)

    def check(self, step: StepBase, base: Path) -> None:
        assert isinstance(step, TuneStep)
        if not _unresolved(step):
            self._read(step, base)

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        from forgeml.core.ids import json_digest

        assert isinstance(step, TuneStep)
        space, options, template = self._read(step, base)
        found = training_inputs(workspace, step, template, base, step.config)
        found["search"] = json_digest(
            {"search": space.model_dump(mode="json"), "tune": options.model_dump(mode="json")}
        )
        return found

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        from forgeml.core.ids import json_digest
        from forgeml.tracking.jobs import TUNE_MODULE, TuneJobSpec

        assert isinstance(step, TuneStep)
        template = self._read(step, base)[2]
        searched = self.inputs(workspace, step, base) | {"trials": str(step.trials)}
        spec = TuneJobSpec(
            config_path=str(step_path(base, step.config)),
            trials=step.trials,
            overrides=_overrides(step),
            study=f"{template.name}-study-{json_digest(searched)[:12]}",
            require_model=True,
        )
        resources = model_job_resources(workspace)
        return JobCall(TUNE_MODULE, spec.model_dump(mode="json"), "tune", resources=resources)


class EvaluateKind:
    name = "evaluate"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"model", "dataset", "split", "metric", "score", "metrics", "run_id"})

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        from forgeml.pipelines.evaluate import training_data
        from forgeml.tracking.registry import get_model_version

        assert isinstance(step, EvaluateStep)
        record = get_model_version(workspace, step.model)
        data = step.data or training_data(record, f"Step '{step.name}'")
        # the digest covers the bundle, and so the FeatureSpec the scorer pins by digest
        return {
            f"model:{step.model}": record.artifact_digest,
            f"dataset:{data}": _dataset_digest(workspace, data),
        }

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        from forgeml.pipelines.evaluate import EVALUATE_MODULE, EvaluateJobSpec

        spec = EvaluateJobSpec(step=step.model_dump(mode="json"))
        resources = model_job_resources(workspace)
        return JobCall(
            EVALUATE_MODULE, spec.model_dump(mode="json"), "evaluate", resources=resources
        )


MODEL_KINDS = (FinetuneKind(), TuneKind(), EvaluateKind())
