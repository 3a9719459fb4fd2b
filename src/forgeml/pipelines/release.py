"""`python -m forgeml.pipelines.release SPEC_JSON`: a gate, promote, deploy or canary step
as a scheduler job.

gate: both models scored on the very same rows (`evaluate.score_model`, as an evaluate
step scores: the held-out split of one dataset version, each encoded as its own training
encoded it); the challenger passes when it beats the champion by the margin, no named
slice's gap widens past its bound, and its recorded fairness metrics keep within
`max_dp_diff` / `max_eo_diff` when given (`tracking.fairness_check`, as `models promote`).
A rejection fails the step, so the release steps after it do not run.
promote: the alias moves; the gate's verdict is audited with it (`model.promote`).
deploy: a new revision of the deployment (replicas started, ready, then recorded).
canary: the challenger joins the deployment on replicas of its own at `weight` percent;
its live measures (errors, latency, and accuracy on the feedback its answers got) are read
every `poll_seconds` and judged (`canary.judge`): a breach rolls back at once; a clean
window promotes (the alias moves, replicas serving the alias hot-reload, the canary
replicas go). Every decision is an
audit event with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from forgeml.core.errors import CanaryRolledBackError, GateRejectedError, NotFoundError
from forgeml.pipelines.canary import Measures, feedback_accuracy, judge, read_roles
from forgeml.pipelines.evaluate import metric_value, score_model
from forgeml.pipelines.steps import CanaryStep, DeployStep, GateStep, GateVerdict, PromoteStep
from forgeml.scheduler.contract import JobContext, run_job, spec_argument

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace


class ReleaseJobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    step: dict[str, Any]


def _slice_gap(metrics: dict[str, float], metric: str, column: str) -> float | None:
    """Largest minus smallest `metric` over the values of `column` (None: no slices)."""
    prefix = f"{metric}/{column}="
    values = [value for name, value in metrics.items() if name.startswith(prefix)]
    return max(values) - min(values) if len(values) > 1 else None


def run_gate(workspace: Workspace, step: GateStep) -> dict[str, Any]:
    """The gate's verdict (see the module docstring).

    Raises:
        GateRejectedError: the challenger does not pass.
        ConfigError: the challenger's scorer gives no such metric.
        NotFoundError: an unknown challenger or dataset.
    """
    from forgeml.tracking import get_model_version

    who = f"Gate '{step.name}'"
    slices = list(step.slices)
    scored = score_model(workspace, step.challenger, step.data, step.split, slices)
    value = metric_value(scored, step.metric, who)
    challenger = scored.model
    fairness = _fairness_gate(workspace, step, challenger)
    try:
        champion = get_model_version(workspace, step.champion).ref
    except NotFoundError:
        return _gate_outputs(step, challenger, value, "", None) | fairness
    held = score_model(workspace, champion, scored.data, step.split, slices)
    base = held.metrics.get(step.metric)
    outputs = _gate_outputs(step, challenger, value, champion, base) | fairness
    if champion == challenger:
        raise GateRejectedError(
            f"Gate '{step.name}': {challenger} already is {step.champion}; nothing to release."
        )
    if base is None:
        raise GateRejectedError(
            f"Gate '{step.name}': the champion {champion} has no metric '{step.metric}' "
            f"{held.where}, so the challenger cannot be compared with it."
        )
    gain = value - base if step.mode == "max" else base - value
    if gain < step.margin:
        raise GateRejectedError(
            f"Gate '{step.name}': {challenger} {step.metric} {value:.4f} does not beat "
            f"{champion}'s {base:.4f} by {step.margin:g} {scored.where}."
        )
    for column, bound in step.slices.items():
        new = _slice_gap(scored.metrics, step.metric, column)
        old = _slice_gap(held.metrics, step.metric, column)
        if new is not None and old is not None and new - old > bound:
            raise GateRejectedError(
                f"Gate '{step.name}': the {step.metric} gap across {column} widens from "
                f"{old:.4f} ({champion}) to {new:.4f} ({challenger}), more than "
                f"{bound:g} {scored.where}."
            )
    return outputs


def _fairness_gate(workspace: Workspace, step: GateStep, challenger: str) -> dict[str, Any]:
    """The fairness bounds' verdict on the challenger's recorded metrics ({}: no bounds).

    Raises:
        GateRejectedError: it breaks a bound, or records no fairness metrics.
    """
    from forgeml.tracking import FairnessBounds, fairness_check, get_model_version

    bounds = FairnessBounds(step.max_dp_diff, step.max_eo_diff)
    if not bounds.active:
        return {}
    record = get_model_version(workspace, challenger)
    verdict = fairness_check(record.ref, record.metrics or {}, bounds)
    if verdict.rejection is not None:
        raise GateRejectedError(f"Gate '{step.name}': {verdict.rejection}")
    return {"fairness": verdict.as_dict()}


def _gate_outputs(
    step: GateStep, challenger: str, value: float, champion: str, base: float | None
) -> dict[str, Any]:
    verdict = GateVerdict(
        gate=step.name,
        metric=step.metric,
        mode=step.mode,
        margin=step.margin,
        champion=champion,
        challenger_value=value,
        champion_value=base,
    )
    return {
        "passed": True,
        "challenger": challenger,
        "champion": champion,
        "challenger_value": value,
        "champion_value": base,
        "verdict": verdict.model_dump(mode="json"),
    }


def run_promote(workspace: Workspace, step: PromoteStep) -> dict[str, Any]:
    """Move the alias to the model (the gate ran as an earlier step); the audit event
    carries the gate's metric and mode, and its verdict (without one: `accuracy`).

    Raises:
        OtherProjectError: the model belongs to another project than the pipeline's.
    """
    from forgeml.tracking import promote

    record = _check_own_model(workspace, step.model)
    verdict = step.gate if isinstance(step.gate, GateVerdict) else None
    done = promote(
        workspace,
        record.name,
        record.version,
        step.alias,
        verdict.metric if verdict else "accuracy",
        mode=verdict.mode if verdict else "max",
        gate={"step": step.name, "by": "pipeline"}
        | ({"verdict": verdict.model_dump(mode="json")} if verdict else {}),
    )
    return {"model": record.ref, "alias": step.alias, "previous": done.previous or ""}


def _check_own_model(workspace: Workspace, ref: str) -> ModelVersionRecord:
    """The version `ref` names, refused unless it belongs to the workspace's project: a
    pipeline moves the aliases of its own project's models only (names resolve in any).

    Raises:
        OtherProjectError: the model belongs to another project.
    """
    from forgeml.tracking import get_model_version

    record = get_model_version(workspace, ref)
    workspace.check_own("Model", record.name, record.project)
    return record


def run_deploy(workspace: Workspace, step: DeployStep) -> dict[str, Any]:
    from forgeml.core.errors import AlreadyExistsError
    from forgeml.serve.deployments import deploy

    try:
        done = deploy(workspace, step.deployment, step.model, step.replicas, runtime=step.runtime)
    except AlreadyExistsError as error:  # already runs exactly this: nothing to do
        done = _own_running(workspace, step.deployment, error)
    return {"deployment": done.name, "revision": done.revision, "model": done.spec.model}


def run_canary(
    workspace: Workspace,
    step: CanaryStep,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Run, watch and decide the canary (see the module docstring).

    Raises:
        CanaryRolledBackError: the canary was rolled back (the step fails with the reason).
        NotFoundError: an unknown deployment or model.
        OtherProjectError: the step moves an alias of another project's model (refused
            before the canary starts).
    """
    from forgeml.serve.deployments import CanarySpec, get_deployment
    from forgeml.serve.deployments._spec import resolve_model

    current = get_deployment(workspace, step.deployment)
    challenger = resolve_model(workspace, step.model)
    if step.alias is not None:
        _check_own_model(workspace, challenger)
    base_spec = current.spec.model_copy(update={"canary": None})
    canary = CanarySpec(model=challenger, weight=step.weight, replicas=1)
    running = _apply(workspace, step.deployment, base_spec.model_copy(update={"canary": canary}))
    _audit(workspace, "deployment.canary.start", step, {"model": challenger, "weight": step.weight})
    start = read_roles(running.replicas)
    began, since = clock(), datetime.now(UTC)
    while True:
        final = clock() - began >= step.seconds
        now = read_roles(running.replicas)
        primary = now.get("primary", Measures()).minus(start.get("primary", Measures()))
        tried = now.get("canary", Measures())
        accuracy = None
        if step.bounds.max_accuracy_drop is not None:
            found = feedback_accuracy(workspace, step.deployment, since)
            accuracy = (found.get(base_spec.model, (0, 0.0)), found.get(challenger, (0, 0.0)))
        verdict = judge(step.bounds, primary, tried, step.min_requests, final, accuracy)
        if verdict.action is not None:
            break
        sleep(min(step.poll_seconds, max(step.seconds - (clock() - began), 0.0)))
    measures = {"primary": primary.as_dict(), "canary": tried.as_dict()}
    if verdict.action == "rollback":
        decided = clock()
        _apply(workspace, step.deployment, base_spec)
        _audit(
            workspace,
            "deployment.canary.rollback",
            step,
            {
                "model": challenger,
                "reason": verdict.reason,
                "measures": measures,
                "watched_s": round(decided - began, 3),
                "rollback_s": round(clock() - decided, 3),
            },
        )
        raise CanaryRolledBackError(
            f"Canary {challenger} on {step.deployment} was rolled back: {verdict.reason}."
        )
    outputs = {
        "decision": "promoted",
        "model": challenger,
        "reason": verdict.reason,
        "measures": measures,
    }
    if step.alias is not None:
        from forgeml.tracking import get_model_version, promote

        record = get_model_version(workspace, challenger)
        promote(
            workspace,
            record.name,
            record.version,
            step.alias,
            "accuracy",
            gate={"step": step.name, "canary": verdict.reason, "measures": measures},
        )
    promoted = base_spec.model_copy(update={"model": challenger})
    _apply(workspace, step.deployment, promoted)
    _audit(
        workspace,
        "deployment.canary.promote",
        step,
        {"model": challenger, "reason": verdict.reason, "measures": measures},
    )
    return outputs


def _apply(workspace: Workspace, name: str, spec: Any) -> Any:
    """Run `spec` as deployment `name`; one that runs it already is left as it is (a
    restarted attempt of the canary job finds its own earlier work done)."""
    from forgeml.core.errors import AlreadyExistsError
    from forgeml.serve.deployments import apply_spec

    try:
        return apply_spec(workspace, name, spec)
    except AlreadyExistsError as error:
        return _own_running(workspace, name, error)


def _own_running(workspace: Workspace, name: str, error: Exception) -> Any:
    """The deployment `name` that already runs a step's spec, when it is of the pipeline's
    own project; else `error` (the name is another project's deployment: a step never
    watches or changes it)."""
    from forgeml.serve.deployments import get_deployment

    found = get_deployment(workspace, name)
    if found.project != workspace.project:
        raise error
    return found


def _audit(workspace: Workspace, action: str, step: CanaryStep, payload: dict[str, Any]) -> None:
    with workspace.store.session() as session:
        workspace.audit(session, action, step.deployment, {"step": step.name, **payload})


def _body(_context: JobContext | None) -> dict[str, Any]:
    from forgeml.core.workspace import open_workspace

    spec = ReleaseJobSpec.model_validate(spec_argument())
    workspace = open_workspace()
    try:
        if spec.kind == "gate":
            return run_gate(workspace, GateStep.model_validate(spec.step))
        if spec.kind == "promote":
            return run_promote(workspace, PromoteStep.model_validate(spec.step))
        if spec.kind == "deploy":
            return run_deploy(workspace, DeployStep.model_validate(spec.step))
        return run_canary(workspace, CanaryStep.model_validate(spec.step))
    finally:
        workspace.close()


if __name__ == "__main__":
    run_job(_body)
