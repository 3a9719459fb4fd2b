"""The deployment spec (what a deployment runs) and the recorded view of a deployment."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from forgeml.core.errors import ConfigError

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

Runtime = Literal["torch", "onnx"]
DEFAULT_CANARY_WEIGHT = 10
# requests in flight per replica when a deployment autoscales without a target
DEFAULT_TARGET_INFLIGHT = 4.0


class CanarySpec(BaseModel):
    """A second model version taking `weight` percent of the traffic on its own replicas."""

    model: str = Field(description="The canary model version, NAME@vN.")
    weight: int = Field(ge=0, le=100, description="Percent of requests sent to the canary.")
    replicas: int = Field(default=1, ge=1, description="Replicas serving the canary.")


class ShadowSpec(BaseModel):
    """A model version that receives a copy of the traffic; its answers are discarded."""

    model: str = Field(description="The shadow model version, NAME@vN.")


class AutoscaleSpec(BaseModel):
    """How many primary replicas the autoscaler may run, and the load each should carry.

    Exactly one target: `target_inflight` (requests in flight per replica) or
    `target_p99_ms` (the p99 latency each replica should stay under).
    """

    min_replicas: int = Field(ge=0, description="Fewest primary replicas (0: scale to zero).")
    max_replicas: int = Field(ge=1, description="Most primary replicas.")
    target_inflight: float | None = Field(
        default=None, gt=0, description="Requests in flight per replica the autoscaler aims at."
    )
    target_p99_ms: float | None = Field(
        default=None, gt=0, description="p99 latency (ms) above which the autoscaler adds one."
    )


class DeploymentSpec(BaseModel):
    """What a deployment runs; stored as JSON in every revision."""

    model: str = Field(description="The primary model version, resolved to NAME@vN.")
    model_ref: str = Field(description="The model reference as given (may be an alias).")
    replicas: int = Field(default=1, ge=1, description="Replicas serving the primary model.")
    canary: CanarySpec | None = None
    shadow: ShadowSpec | None = None
    runtime: Runtime = Field(default="torch", description="Model-server runtime.")
    max_batch_size: int | None = Field(default=None, ge=1, description="Server batch limit.")
    max_wait_ms: float | None = Field(default=None, ge=0, description="Server batching wait.")
    latency_objective_ms: float | None = Field(
        default=None, gt=0, description="The p99 each replica should meet (alert threshold)."
    )
    log_sample_rate: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Share of requests the primary and canary replicas log, to one shared "
        "request log (drift and feedback read it; 1 lets feedback name any request).",
    )
    autoscale: AutoscaleSpec | None = Field(
        default=None, description="Replica bounds and target; None: a fixed replica count."
    )
    rag: list[str] = Field(
        default_factory=list,
        description="RAG index versions (NAME@vN) every replica serves on /v1/rag/NAME/...",
    )

    def plan(self) -> list[tuple[str, str]]:
        """`(role, model)` of every replica: primaries, then canaries, then the shadow."""
        replicas = [("primary", self.model)] * self.replicas
        if self.canary is not None:
            replicas += [("canary", self.canary.model)] * self.canary.replicas
        if self.shadow is not None:
            replicas.append(("shadow", self.shadow.model))
        return replicas


@dataclass(frozen=True)
class Replica:
    """One recorded model-server process of a deployment."""

    role: str
    model_ref: str
    url: str
    status: str
    pid: int | None
    port: int
    checked_at: datetime | None


@dataclass(frozen=True)
class Deployment:
    """A deployment as recorded: its current spec, revision, status and replicas."""

    name: str
    spec: DeploymentSpec
    status: str
    revision: int
    created_at: datetime
    updated_at: datetime
    error: str | None
    replicas: list[Replica] = field(default_factory=list)
    # the project it belongs to (not in `to_dict`: the CLI's output is unchanged)
    project: str = "default"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (for `--json` output and the gateway's logs)."""
        return {
            "name": self.name,
            "status": self.status,
            "revision": self.revision,
            "spec": self.spec.model_dump(),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "error": self.error,
            "replicas": [vars(replica) for replica in self.replicas],
        }

    @classmethod
    def from_dict(cls, summary: dict[str, Any]) -> Deployment:
        """The deployment `to_dict` summarised, from its JSON (the API's answer)."""

        def moment(value: Any) -> Any:  # ISO 8601 in JSON, a datetime in Python
            return datetime.fromisoformat(value) if isinstance(value, str) else value

        replicas = [
            Replica(**{**replica, "checked_at": moment(replica["checked_at"])})
            for replica in summary["replicas"]
        ]
        return cls(
            name=summary["name"],
            spec=DeploymentSpec.model_validate(summary["spec"]),
            status=summary["status"],
            revision=summary["revision"],
            created_at=moment(summary["created_at"]),
            updated_at=moment(summary["updated_at"]),
            error=summary["error"],
            replicas=replicas,
        )


def resolve_model(workspace: Workspace, ref: str) -> str:
    """`ref` (NAME, NAME@vN, NAME@ALIAS) as the NAME@vN it names now."""
    from forgeml.tracking import get_model_version

    record = get_model_version(workspace, ref)
    return f"{record.name}@v{record.version}"


def check_own_models(workspace: Workspace, spec: DeploymentSpec) -> None:
    """Refuse `spec` unless every model version it serves (primary, canary, shadow) belongs
    to the workspace's project, the deployment's: a deployment serves its own project's
    models only (names resolve in any project, so a name alone proves nothing).

    Raises:
        NotFoundError: a version is no longer registered.
        OtherProjectError: a version belongs to another project.
    """
    from forgeml.tracking import get_model_version

    for model in dict.fromkeys(role_model for _, role_model in spec.plan()):
        record = get_model_version(workspace, model)
        workspace.check_own("Model", record.name, record.project)


def build_spec(
    workspace: Workspace,
    model_ref: str,
    replicas: int = 1,
    canary: str | None = None,
    canary_weight: int | None = None,
    canary_replicas: int = 1,
    shadow: str | None = None,
    runtime: str = "torch",
    max_batch_size: int | None = None,
    max_wait_ms: float | None = None,
    latency_objective_ms: float | None = None,
    log_sample_rate: float | None = None,
    min_replicas: int | None = None,
    max_replicas: int | None = None,
    target_inflight: float | None = None,
    target_p99_ms: float | None = None,
    rag: list[str] | None = None,
) -> DeploymentSpec:
    """Validate the options and resolve every model reference to NAME@vN.

    Raises:
        ConfigError: a count, weight or runtime is out of range.
        NotFoundError, UsageError: a model reference names nothing or is malformed.
    """
    if replicas < 1 or canary_replicas < 1:
        raise ConfigError(f"Replicas must be at least 1, not {min(replicas, canary_replicas)}.")
    if canary_weight is not None and not 0 <= canary_weight <= 100:
        raise ConfigError(f"The canary weight is a percentage from 0 to 100, not {canary_weight}.")
    if canary is None and canary_weight is not None:
        raise ConfigError("A canary weight needs a canary model (--canary MODEL_REF).")
    if runtime not in ("torch", "onnx"):
        raise ConfigError(f"The runtime must be torch or onnx, not '{runtime}'.")
    if max_batch_size is not None and max_batch_size < 1:
        raise ConfigError(f"The max batch size must be at least 1, not {max_batch_size}.")
    if max_wait_ms is not None and max_wait_ms < 0:
        raise ConfigError(f"The max wait must be 0 ms or more, not {max_wait_ms}.")
    if latency_objective_ms is not None and latency_objective_ms <= 0:
        raise ConfigError(
            f"The latency objective must be more than 0 ms, not {latency_objective_ms}."
        )
    if log_sample_rate is not None and not 0 <= log_sample_rate <= 1:
        raise ConfigError(f"The log sample rate is a share from 0 to 1, not {log_sample_rate}.")
    autoscale = build_autoscale(min_replicas, max_replicas, target_inflight, target_p99_ms)
    if autoscale is not None:
        # the first revision starts with --replicas, kept within the bounds (one at least:
        # a deployment proves its model serves before it may idle down to zero)
        replicas = min(max(replicas, autoscale.min_replicas, 1), autoscale.max_replicas)
    weight = DEFAULT_CANARY_WEIGHT if canary_weight is None else canary_weight
    return DeploymentSpec(
        model=resolve_model(workspace, model_ref),
        model_ref=model_ref,
        replicas=replicas,
        canary=None
        if canary is None
        else CanarySpec(
            model=resolve_model(workspace, canary), weight=weight, replicas=canary_replicas
        ),
        shadow=None if shadow is None else ShadowSpec(model=resolve_model(workspace, shadow)),
        runtime="onnx" if runtime == "onnx" else "torch",
        max_batch_size=max_batch_size,
        max_wait_ms=max_wait_ms,
        latency_objective_ms=latency_objective_ms,
        log_sample_rate=log_sample_rate,
        autoscale=autoscale,
        rag=list(rag or []),
    )


def build_autoscale(
    min_replicas: int | None,
    max_replicas: int | None,
    target_inflight: float | None,
    target_p99_ms: float | None,
) -> AutoscaleSpec | None:
    """The autoscale part of a spec (None when no bound is given).

    Raises:
        ConfigError: a bound or target is missing, out of range or contradictory.
    """
    targets = target_inflight is not None or target_p99_ms is not None
    if min_replicas is None and max_replicas is None:
        if targets:
            raise ConfigError(
                "A scaling target needs replica bounds: add --min-replicas and --max-replicas."
            )
        return None
    if min_replicas is None or max_replicas is None:
        raise ConfigError("Autoscaling needs both --min-replicas and --max-replicas.")
    if min_replicas < 0:
        raise ConfigError(f"--min-replicas must be 0 or more, not {min_replicas}.")
    if max_replicas < 1:
        raise ConfigError(f"--max-replicas must be at least 1, not {max_replicas}.")
    if min_replicas > max_replicas:
        raise ConfigError(
            f"--min-replicas ({min_replicas}) cannot be more than --max-replicas ({max_replicas})."
        )
    if target_inflight is not None and target_p99_ms is not None:
        raise ConfigError("Can't scale on both --target-inflight and --target-p99-ms. Choose one.")
    if target_inflight is None and target_p99_ms is None:
        target_inflight = DEFAULT_TARGET_INFLIGHT
    for flag, value in (("--target-inflight", target_inflight), ("--target-p99-ms", target_p99_ms)):
        if value is not None and not value > 0:
            raise ConfigError(f"{flag} must be more than 0, not {value:g}.")
    return AutoscaleSpec(
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        target_inflight=target_inflight,
        target_p99_ms=target_p99_ms,
    )
