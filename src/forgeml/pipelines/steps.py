"""The typed steps of a pipeline file: one pydantic model per kind, a union on `kind`.

A new kind is one model here, added to `Step`, and one record in `kinds.py` (or, for
finetune, tune and evaluate, `model_kinds.py`; for the release kinds gate, promote, deploy
and canary, `release_kinds.py`): its outputs, inputs and job.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from forgeml.data.streams.options import StreamOptions

# a command step's outputs also hold the digests of its files, under this key
DIGESTS_OUTPUT = "digests"
_OUTPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StepBase(_Strict):
    """What every step has: a name, its dependencies, and how its job is run."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$", description="The step's name.")
    kind: str = Field(description="The step's kind (each kind narrows it to its own name).")
    needs: list[str] = Field(
        default_factory=list,
        description="Steps that must succeed first (also inferred from ${steps.NAME.OUTPUT}).",
    )
    retries: NonNegativeInt = Field(0, description="Retries of the step's job after a failure.")
    timeout: PositiveFloat | None = Field(None, description="Wall-time limit of its job (s).")
    env: list[str] = Field(
        default_factory=list,
        description="Environment variables the step reads: passed to its job, part of its key.",
    )


class CommandStep(StepBase):
    """Any program: its argv, the files it reads, the files it writes (its outputs)."""

    kind: Literal["command"]
    argv: list[str] = Field(min_length=1, description="The program and its arguments.")
    reads: list[str] = Field(
        default_factory=list, description="Files the command reads (their content is in the key)."
    )
    outputs: dict[str, str] = Field(
        default_factory=dict,
        description="Output name -> file the command writes; the output is the file's path.",
    )

    @field_validator("outputs")
    @classmethod
    def _output_names(cls, outputs: dict[str, str]) -> dict[str, str]:
        for name in outputs:
            if name == DIGESTS_OUTPUT or not _OUTPUT_NAME.match(name):
                raise ValueError(
                    f"'{name}' cannot name an output: use letters, digits, _ and -, "
                    f"and not '{DIGESTS_OUTPUT}'"
                )
        return outputs


class DataStep(StepBase):
    """A dataset operation: `derive` a version through a transform, or `add` a file."""

    kind: Literal["data"]
    derive: str | None = Field(None, description="A transform (clean, split, features, ...).")
    add: str | None = Field(None, description="A file to ingest as a new version.")
    dataset: str = Field(
        description="derive: the parent version's reference; add: the dataset's name."
    )
    params: dict[str, Any] = Field(default_factory=dict, description="The transform's params.")
    into: str | None = Field(None, description="derive: the dataset to record into.")
    label: str | None = Field(None, description="add: the label column.")

    @model_validator(mode="after")
    def _one_operation(self) -> DataStep:
        if (self.derive is None) == (self.add is None):
            raise ValueError("give exactly one of `derive` and `add`")
        return self


class StreamStep(StepBase, StreamOptions):
    """One bounded window of a broker's stream as the next version of a dataset, as
    `forgeml data ingest-stream` reads it (`max_records`, `max_seconds` and `payload` are
    its options); never taken from the cache: each run reads the messages that came since."""

    kind: Literal["stream"]
    dataset: str = Field(description="The dataset's name; also names the durable consumer.")
    url: str = Field(
        description="mqtt://, nats://, amqp:// or redis:// broker URL with the topic, "
        "subject, queue or stream as its path; never with a password (see password_env)."
    )
    password_env: str | None = Field(
        None,
        description="An environment variable holding the broker's password, also listed in "
        "`env` (the job receives it; the pipeline's records never hold it).",
    )


class TrainStep(StepBase):
    """Train a config file, or reproduce a run's recorded config (with overrides); its
    output is the registered model version."""

    kind: Literal["train"]
    config: str | None = Field(None, description="A train config file (YAML).")
    reproduce: str | None = Field(
        None,
        description="Train again from this run's recorded config (a run, or a model "
        "version NAME@ALIAS whose run it was), as `forgeml runs reproduce` does.",
    )
    data: str | None = Field(
        None, description="The dataset version to train on instead of the config's."
    )
    overrides: list[str] = Field(
        default_factory=list, description="key.path=value overrides of the config."
    )

    @model_validator(mode="after")
    def _one_source(self) -> TrainStep:
        if (self.config is None) == (self.reproduce is None):
            raise ValueError("give exactly one of `config` and `reproduce`")
        return self


class FinetuneStep(StepBase):
    """Fine-tune a pretrained model as `forgeml finetune CONFIG` does: LoRA through PEFT, or
    distillation from a registered teacher; its output is the registered model version."""

    kind: Literal["finetune"]
    config: str = Field(
        description="A fine-tuning config file (YAML) with a `lora` or `distill` section."
    )
    data: str | None = Field(
        None, description="The dataset version to fine-tune on instead of the config's."
    )
    overrides: list[str] = Field(
        default_factory=list, description="key.path=value overrides of the config."
    )


class TuneStep(StepBase):
    """Search hyper-parameters as `forgeml tune CONFIG --trials N` does (Optuna; each trial
    a child run); its outputs are the best trial's registered model, run and value."""

    kind: Literal["tune"]
    config: str = Field(
        description="A tune config file: a train config with `search` and `tune` sections."
    )
    trials: PositiveInt = Field(10, description="How many trials the study runs.")
    data: str | None = Field(
        None, description="The dataset version to search on instead of the config's."
    )
    overrides: list[str] = Field(
        default_factory=list, description="key.path=value overrides of the training part."
    )


class EvaluateStep(StepBase):
    """Score a model version on a dataset version's split, as the gate scores (overall and
    per slice); the scores are recorded as a run of the `evaluate` experiment."""

    kind: Literal["evaluate"]
    model: str = Field(description="The model version (NAME@vN or NAME@ALIAS).")
    data: str | None = Field(
        None,
        description="Dataset version whose split it is scored on (default: the model's "
        "training data).",
    )
    split: Literal["train", "validation", "test"] = "test"
    metric: str = Field("accuracy", description="The metric that is the step's `score`.")
    slices: list[str] = Field(
        default_factory=list, description="Columns to score per value of, e.g. [sex, race]."
    )


class OptimizeStep(StepBase):
    """Make an optimised version (onnx, int8 or prune) of a model version."""

    kind: Literal["optimize"]
    model: str = Field(description="The source model version (NAME@vN, NAME@ALIAS).")
    mode: Literal["onnx", "int8", "prune"]
    options: dict[str, Any] = Field(
        default_factory=dict, description="Other OptimizeRequest fields (tolerance, sparsity...)."
    )


class FairnessGate(BaseModel):
    """The two fairness bounds a gate takes (the gate step, a monitoring policy's gate), as
    `models promote --max-dp-diff/--max-eo-diff` does (`tracking.fairness_check`)."""

    max_dp_diff: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Reject a challenger whose demographic parity difference across any "
        "sensitive column (its recorded fairness metrics) is above this.",
    )
    max_eo_diff: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Reject a challenger whose equalized odds difference across any "
        "sensitive column is above this.",
    )


class GateStep(StepBase, FairnessGate):
    """Let a challenger through only if it beats the champion on the same held-out rows."""

    kind: Literal["gate"]
    challenger: str = Field(description="The candidate model version (NAME@vN).")
    champion: str = Field(
        description="The model it must beat, usually NAME@ALIAS; an alias nobody holds yet "
        "lets the challenger through."
    )
    data: str | None = Field(
        None,
        description="Dataset version whose split both are scored on (default: the "
        "challenger's training data).",
    )
    split: Literal["train", "validation", "test"] = "test"
    metric: str = Field("accuracy", description="The metric that decides.")
    mode: Literal["max", "min"] = Field("max", description="max: higher is better.")
    margin: float = Field(0.0, ge=0, description="By how much the challenger must win.")
    slices: dict[str, float] = Field(
        default_factory=dict,
        description="column -> how much the gap of `metric` between the column's values may "
        "widen (challenger's gap minus champion's), e.g. {sex: 0.02}.",
    )


class GateVerdict(_Strict):
    """What a gate step compared, handed to the promotion after it (its `verdict` output)."""

    gate: str = Field(description="The gate step's name.")
    metric: str
    mode: Literal["max", "min"]
    margin: float
    champion: str = Field(description="The model it beat; empty when nobody held the alias.")
    challenger_value: float
    champion_value: float | None


# `${steps.NAME.challenger}` whole: only a gate step has a `challenger` output
_GATE_CHALLENGER = re.compile(r"^\$\{\s*steps\.([^.{}\s]+)\.challenger\s*\}$")
_WHOLE_REFERENCE = re.compile(r"^\$\{[^{}]*\}$")


class PromoteStep(StepBase):
    """Point an alias at a model version (after a gate step)."""

    kind: Literal["promote"]
    model: str = Field(description="The model version to promote (NAME@vN).")
    alias: str = Field("production", description="The alias that moves.")
    # a str only until the run substitutes the reference
    gate: GateVerdict | str | None = Field(
        None,
        description="The gate's verdict, audited with the promotion (its metric, mode, margin "
        "and values): `${steps.GATE.verdict}`, which is the default when `model` is "
        "`${steps.GATE.challenger}`.",
    )

    @model_validator(mode="before")
    @classmethod
    def _gate_of_model(cls, data: Any) -> Any:
        if isinstance(data, dict) and "gate" not in data:
            found = _GATE_CHALLENGER.match(str(data.get("model", "")))
            if found:
                return data | {"gate": f"${{steps.{found.group(1)}.verdict}}"}
        return data

    @field_validator("gate")
    @classmethod
    def _gate_reference(cls, gate: GateVerdict | str | None) -> GateVerdict | str | None:
        if isinstance(gate, str) and not _WHOLE_REFERENCE.match(gate):
            raise ValueError("give the gate's verdict as ${steps.GATE.verdict}")
        return gate


class DeployStep(StepBase):
    """Deploy a model version as a named deployment (a new revision if it exists)."""

    kind: Literal["deploy"]
    model: str = Field(description="The model reference (NAME@vN or NAME@ALIAS).")
    deployment: str = Field(description="The deployment's name.")
    replicas: int = Field(1, ge=1)
    runtime: Literal["torch", "onnx"] = "torch"


class CanaryBounds(_Strict):
    """The live measures that roll a canary back; each None is not checked."""

    max_error_rate: float | None = Field(
        0.01, ge=0, le=1, description="Share of the canary's requests answered with a 5xx."
    )
    max_p99_ratio: float | None = Field(
        None, gt=0, description="The canary's p99 latency over the primary's, at most."
    )
    max_p99_ms: float | None = Field(None, gt=0, description="The canary's p99 latency, at most.")
    max_accuracy_drop: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Accuracy on feedback (labels that arrived for its answers) below the "
        "primary's by at most this; judged once both have `min_feedback` labels.",
    )
    min_feedback: int = Field(20, ge=1, description="Labels each role needs to be compared.")


class CanaryStep(StepBase):
    """Run a challenger as a canary of a deployment, watch it, then promote or roll back."""

    kind: Literal["canary"]
    deployment: str = Field(description="The deployment that gets the canary.")
    model: str = Field(description="The challenger (NAME@vN).")
    weight: int = Field(10, ge=1, le=100, description="Percent of the traffic it takes.")
    seconds: PositiveFloat = Field(60.0, description="How long it is watched.")
    min_requests: NonNegativeInt = Field(
        20, description="Requests the canary must answer to be judged (else rolled back)."
    )
    poll_seconds: PositiveFloat = Field(2.0, description="Between two looks at the measures.")
    bounds: CanaryBounds = Field(default_factory=CanaryBounds)
    alias: str | None = Field(
        "production", description="The alias that moves to the challenger when it passes."
    )


Step = Annotated[
    CommandStep
    | DataStep
    | StreamStep
    | TrainStep
    | FinetuneStep
    | TuneStep
    | EvaluateStep
    | OptimizeStep
    | GateStep
    | PromoteStep
    | DeployStep
    | CanaryStep,
    Field(discriminator="kind"),
]


class PipelineSpec(_Strict):
    """A pipeline file: a name, parameters (`${params.NAME}`) and the steps."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    params: dict[str, Any] = Field(default_factory=dict, description="Values for ${params.NAME}.")
    steps: list[Step] = Field(min_length=1)
