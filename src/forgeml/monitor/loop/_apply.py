"""Applying a policy: check it against what exists, write its pipeline, add its trigger.

The compiled pipeline is written beside the policy file (`.NAME.loop.yaml`), so the
relative paths of its preparation steps mean what they meant there. The trigger is named
`policy-NAME`; applying a policy again replaces its pipeline and trigger (the trigger's
cursor starts again from now).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import ConfigError, NotFoundError
from forgeml.monitor.loop._policy import Policy, compile_policy, load_policy

if TYPE_CHECKING:
    from forgeml.core.store import PipelineTriggerRecord
    from forgeml.core.workspace import Workspace

TRIGGER_PREFIX = "policy-"


def _check(workspace: Workspace, policy: Policy, source: str) -> None:
    """What a policy names must exist, and its gate's metric must be one runs record.

    Raises:
        NotFoundError: no such deployment or champion.
        ConfigError: the champion's run records no such metric.
    """
    from forgeml.serve.deployments import get_deployment
    from forgeml.tracking import get_model_version

    get_deployment(workspace, policy.deployment)
    champion = get_model_version(workspace, policy.model)
    metrics = champion.run.metrics or {}
    if policy.gate.metric not in metrics:
        known = ", ".join(
            sorted(k for k, v in metrics.items() if isinstance(v, float | int) and "/" not in k)
        )
        raise ConfigError(
            f"{source}: gate.metric '{policy.gate.metric}' is not a metric the champion's run "
            f"records (it records: {known})."
        )
    missing = [
        c
        for c in policy.gate.slices
        if not any(k.startswith(f"{policy.gate.metric}/{c}=") for k in metrics)
    ]
    if missing:
        raise ConfigError(
            f"{source}: gate.slices names {', '.join(missing)}, which the champion's run has "
            "no per-slice metrics for (add them to its config's data.slices)."
        )


def apply_policy(workspace: Workspace, path: str | Path) -> PipelineTriggerRecord:
    """Validate the policy at `path`, write its pipeline and (re)place its alert trigger.

    Raises:
        ConfigError: an invalid policy or preparation pipeline, or a gate metric no run
            records.
        NotFoundError: the deployment or champion does not exist.
    """
    from forgeml.pipelines.load import load_pipeline
    from forgeml.pipelines.trigger_kinds import parse_alert_subject
    from forgeml.pipelines.triggers import add_trigger, remove_trigger

    path = Path(path).resolve()
    policy = load_policy(path)
    parse_alert_subject(policy.alert_subject())
    _check(workspace, policy, str(path))
    compiled = compile_policy(policy, path.parent)
    target = path.parent / f".{policy.name}.loop.yaml"
    text = yaml.safe_dump(compiled, sort_keys=False)
    scratch = path.parent / f".{policy.name}.loop.check.yaml"
    atomic_write_text(scratch, text)
    try:
        load_pipeline(scratch)  # an invalid compiled pipeline leaves nothing behind
    finally:
        scratch.unlink(missing_ok=True)
    atomic_write_text(target, text)
    name = f"{TRIGGER_PREFIX}{policy.name}"
    with contextlib.suppress(NotFoundError):  # applied before: replaced
        remove_trigger(workspace, name)
    trigger = add_trigger(workspace, name, target, alert=policy.alert_subject())
    with workspace.store.session() as session:
        workspace.audit(
            session,
            "monitor.policy.apply",
            f"deployment:{policy.deployment}",
            {
                "policy": policy.name,
                "file": str(path),
                "pipeline": str(target),
                "on": trigger.subject,
            },
        )
    return trigger


def list_policies(workspace: Workspace) -> list[PipelineTriggerRecord]:
    """The applied policies' triggers."""
    from forgeml.pipelines.triggers import list_triggers

    return [t for t in list_triggers(workspace) if t.name.startswith(TRIGGER_PREFIX)]


def policy_summary(trigger: PipelineTriggerRecord) -> dict[str, Any]:
    """A policy as JSON-ready data: its name, alert subject and compiled pipeline."""
    return {
        "name": trigger.name.removeprefix(TRIGGER_PREFIX),
        "on": trigger.subject,
        "pipeline": trigger.file,
        "applied_at": trigger.created_at,
        "applied_by": trigger.created_by,
    }


def remove_policy(workspace: Workspace, name: str) -> None:
    """Remove policy `name`'s trigger (runs already started go on).

    Raises:
        NotFoundError: no policy of that name is applied.
    """
    from forgeml.pipelines.triggers import remove_trigger

    try:
        remove_trigger(workspace, f"{TRIGGER_PREFIX}{name}")
    except NotFoundError:
        raise NotFoundError(
            f"No policy '{name}' is applied (see `forgeml monitor policy list`)."
        ) from None
