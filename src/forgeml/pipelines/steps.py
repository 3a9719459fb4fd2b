"""The typed steps of a pipeline file: one pydantic model per kind, a union on `kind`.

A new kind (tune, evaluate, gate, promote, deploy, canary) is one model here, added to
`Step`, and one record in `kinds.py` (its outputs, inputs and job).
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
    field_validator,
    model_validator,
)

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


class TrainStep(StepBase):
    """Train a config file (with overrides); its output is the registered model version."""

    kind: Literal["train"]
    config: str = Field(description="A train config file (YAML).")
    overrides: list[str] = Field(
        default_factory=list, description="key.path=value overrides of the config."
    )


class OptimizeStep(StepBase):
    """Make an optimised version (onnx, int8 or prune) of a model version."""

    kind: Literal["optimize"]
    model: str = Field(description="The source model version (NAME@vN, NAME@ALIAS).")
    mode: Literal["onnx", "int8", "prune"]
    options: dict[str, Any] = Field(
        default_factory=dict, description="Other OptimizeRequest fields (tolerance, sparsity...)."
    )


Step = Annotated[CommandStep | DataStep | TrainStep | OptimizeStep, Field(discriminator="kind")]


class PipelineSpec(_Strict):
    """A pipeline file: a name, parameters (`${params.NAME}`) and the steps."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    params: dict[str, Any] = Field(default_factory=dict, description="Values for ${params.NAME}.")
    steps: list[Step] = Field(min_length=1)
