"""A monitoring policy (YAML, validated by pydantic) and the pipeline it compiles into."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat

from forgeml.core.configfile import load_yaml, load_yaml_model, parse_model
from forgeml.core.errors import ConfigError
from forgeml.pipelines.steps import CanaryBounds, FairnessGate

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrainPolicy(_Strict):
    """How the challenger is made: the champion's recorded config on newer data."""

    data: str = Field(
        description="The dataset version to train on: NAME (its newest version when the loop "
        "runs) or ${steps.STEP.dataset} of a preparation step."
    )
    prepare: str | None = Field(
        None, description="A pipeline file whose steps run first (e.g. clean, split, features)."
    )
    overrides: list[str] = Field(
        default_factory=list, description="key=value overrides of the champion's config."
    )


class GatePolicy(_Strict, FairnessGate):
    """The challenger beats the champion on the same held-out rows (see the gate step)."""

    split: Literal["train", "validation", "test"] = "test"
    metric: str = "accuracy"
    mode: Literal["max", "min"] = "max"
    margin: float = Field(0.0, ge=0)
    slices: dict[str, float] = Field(default_factory=dict)


class CanaryPolicy(_Strict):
    """The canary's weight, length and the live bounds that roll it back."""

    weight: int = Field(10, ge=1, le=100)
    seconds: PositiveFloat = 60.0
    min_requests: NonNegativeInt = 20
    poll_seconds: PositiveFloat = 2.0
    bounds: CanaryBounds = Field(default_factory=CanaryBounds)


class Policy(_Strict):
    """Which alerts on a deployment start which retraining, and how it is released."""

    name: str = Field(pattern=NAME_PATTERN)
    deployment: str = Field(pattern=NAME_PATTERN, description="The deployment watched.")
    model: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*@[A-Za-z_][A-Za-z0-9_-]*$",
        description="The champion, NAME@ALIAS: retrained from, gated against, and the alias "
        "that moves when a challenger is promoted.",
    )
    on_alerts: list[str] = Field(
        default_factory=lambda: ["ForgemlDriftDetected", "ForgemlAccuracyDrop"], min_length=1
    )
    match: dict[str, str] | None = Field(
        None,
        description="Labels an alert must carry (default: {model: DEPLOYMENT}: a deployment's "
        "replicas serve its model under the deployment's name).",
    )
    retrain: RetrainPolicy
    gate: GatePolicy = Field(default_factory=GatePolicy)
    canary: CanaryPolicy = Field(default_factory=CanaryPolicy)

    @property
    def alias(self) -> str:
        return self.model.rpartition("@")[2]

    def alert_subject(self) -> str:
        """The alert trigger's subject: `RULE,RULE{label=value,...}`."""
        labels = self.match if self.match is not None else {"model": self.deployment}
        matchers = ",".join(f"{key}={value}" for key, value in sorted(labels.items()))
        return ",".join(self.on_alerts) + (f"{{{matchers}}}" if matchers else "")


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file (errors name the file and the key)."""
    return load_yaml_model(path, Policy)


def compile_policy(policy: Policy, base: Path) -> dict[str, Any]:
    """The pipeline (as a pipeline file's mapping) the policy runs when its alert fires.

    Raises:
        ConfigError: the preparation pipeline is invalid or names a step retrain, gate or
            canary.
    """
    steps: list[dict[str, Any]] = []
    params: dict[str, Any] = {"event": ""}
    if policy.retrain.prepare is not None:
        prepare_path = (base / policy.retrain.prepare).resolve()
        prepared = load_yaml(prepare_path) or {}
        if not isinstance(prepared, dict) or not isinstance(prepared.get("steps"), list):
            raise ConfigError(f"{prepare_path}: a pipeline file with `steps` was expected.")
        for step in prepared["steps"]:
            if isinstance(step, dict) and step.get("name") in ("retrain", "gate", "canary"):
                raise ConfigError(
                    f"{prepare_path}: step '{step['name']}' is one the policy adds; rename it."
                )
            steps.append(step)
        params |= prepared.get("params") or {}
    gate = policy.gate.model_dump(mode="json")
    canary = policy.canary.model_dump(mode="json")
    steps += [
        {
            "name": "retrain",
            "kind": "train",
            "reproduce": policy.model,
            "data": policy.retrain.data,
            "overrides": list(policy.retrain.overrides),
        },
        {
            "name": "gate",
            "kind": "gate",
            "challenger": "${steps.retrain.model}",
            "champion": policy.model,
            **gate,
        },
        {
            "name": "canary",
            "kind": "canary",
            "deployment": policy.deployment,
            "model": "${steps.gate.challenger}",
            "alias": policy.alias,
            **canary,
        },
    ]
    return {"name": f"policy-{policy.name}", "params": params, "steps": steps}


def parse_policy(data: Any, source: str) -> Policy:
    """Validate a policy's mapping (errors name `source` and the key)."""
    return parse_model(Policy, data, source)
