"""The release kinds: gate, promote, deploy and canary (see `release.py` for their jobs).

A gate's key digests both models and the held-out data, so an unchanged gate is taken
from the cache; promote, deploy and canary change the world (an alias, replicas), so they
are never taken from the cache nor recorded in it (`EFFECT_KINDS`): each run runs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from forgeml.core.errors import NotFoundError
from forgeml.pipelines._kind_base import JobCall
from forgeml.pipelines.steps import CanaryStep, DeployStep, GateStep, PromoteStep, StepBase

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

RELEASE_MODULE = "forgeml.pipelines.release"


def _model_digest(workspace: Workspace, ref: str) -> str:
    from forgeml.tracking.registry import get_model_version

    return get_model_version(workspace, ref).artifact_digest


def _call(step: StepBase) -> JobCall:
    spec = {"kind": step.kind, "step": step.model_dump(mode="json")}
    return JobCall(RELEASE_MODULE, spec, "release")


class GateKind:
    name = "gate"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset(
            {"passed", "challenger", "champion", "challenger_value", "champion_value", "verdict"}
        )

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        from forgeml.data import catalog

        assert isinstance(step, GateStep)
        found = {f"model:{step.challenger}": _model_digest(workspace, step.challenger)}
        try:
            found[f"model:{step.champion}"] = _model_digest(workspace, step.champion)
        except NotFoundError:
            found[f"model:{step.champion}"] = "none"  # nobody holds the alias yet
        if step.data is not None:
            with workspace.store.session() as session:
                found[f"dataset:{step.data}"] = catalog.resolve(session, step.data).digest
        return found

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        return _call(step)


class PromoteKind:
    name = "promote"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"model", "alias", "previous"})

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        assert isinstance(step, PromoteStep)
        return {f"model:{step.model}": _model_digest(workspace, step.model)}

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        return _call(step)


class DeployKind:
    name = "deploy"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"deployment", "revision", "model"})

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        assert isinstance(step, DeployStep)
        return {f"model:{step.model}": _model_digest(workspace, step.model)}

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        return _call(step)


class CanaryKind:
    name = "canary"

    def outputs(self, step: StepBase) -> frozenset[str]:
        return frozenset({"decision", "model", "reason", "measures"})

    def inputs(self, workspace: Workspace, step: StepBase, base: Path) -> dict[str, str]:
        assert isinstance(step, CanaryStep)
        return {f"model:{step.model}": _model_digest(workspace, step.model)}

    def job(self, workspace: Workspace, step: StepBase, base: Path) -> JobCall:
        return _call(step)


RELEASE_KINDS = (GateKind(), PromoteKind(), DeployKind(), CanaryKind())
EFFECT_KINDS = frozenset({"promote", "deploy", "canary"})
