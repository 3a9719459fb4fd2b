"""The model registry: MLflow's, with forgeml's lineage row and a gated promotion.

A registered version lives in three places that agree: the MLflow registry (name,
version, aliases such as `production`), the run's MLflow artifacts under `model/`, and
forgeml's `model_versions` row (dataset version -> run -> model version -> parent model)
with the content digest of the bundle in forgeml's artifact store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import exc as sa_exc
from sqlalchemy import select

from forgeml.core.errors import (
    AlreadyExistsError,
    ForgemlError,
    IntegrityError,
    NotFoundError,
    UsageError,
)
from forgeml.core.ids import new_id, validate_alias, validate_name
from forgeml.core.store import ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.tracking._bundle import check_bundle, extract_tar, write_tar
from forgeml.tracking._mlflow import json_safe, open_client
from forgeml.tracking.fairness import FairnessBounds, fairness_check
from forgeml.tracking.runs import RunHandle, get_run

if TYPE_CHECKING:
    from mlflow import MlflowClient

MODEL_ARTIFACT_PATH = "model"
_VERSION = re.compile(r"^v(\d+)$")
_ALIAS = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
_HEX = re.compile(r"^[0-9a-f]{4,64}$")


class PromotionRejectedError(ForgemlError):
    """The candidate does not beat the model holding the alias on the gating metric."""

    http_status = 409


@dataclass(frozen=True)
class Promotion:
    """What `promote` did: `model` now holds `alias`, formerly held by `previous`."""

    model: ModelVersionRecord
    alias: str
    metric: str
    value: float | None
    previous: str | None
    previous_value: float | None
    forced: bool
    changed: bool
    fairness: dict[str, Any] | None = None  # the fairness gate's verdict, when bounds were set


def log_model_bundle(handle: RunHandle, bundle_dir: Path) -> str:
    """Upload a bundle folder as the run's `model/` artifacts and into forgeml's artifacts.

    Args:
        handle: the run that produced the model.
        bundle_dir: `model.json` (architecture, params, task, class names), the
            `.safetensors` weights, and any companions such as `feature_spec.json`.

    Returns:
        The forgeml artifact digest of the bundle's deterministic tar.

    Raises:
        NotFoundError, InvalidDataError: the folder is missing, incomplete or unsafe.
    """
    bundle_dir = Path(bundle_dir)
    files = check_bundle(bundle_dir)
    artifacts = handle.workspace.artifacts
    with artifacts.local_tempfile(suffix=".tar") as tar_path:
        write_tar(bundle_dir, files, tar_path)
        digest = artifacts.put_file(tar_path)
    handle.client.log_artifacts(handle.run_id, str(bundle_dir), MODEL_ARTIFACT_PATH)
    handle.client.set_tag(handle.run_id, "forgeml.model_digest", digest)
    return digest


def register_model(
    workspace: Workspace,
    handle: RunHandle,
    name: str,
    bundle_dir: Path,
    parent: str | None = None,
    metrics: Mapping[str, Any] | None = None,
) -> ModelVersionRecord:
    """Register the run's model bundle as the next version of `name`.

    Args:
        workspace: where the lineage row goes.
        handle: the run that trained the model.
        name: registered model name.
        bundle_dir: the model bundle folder (see `log_model_bundle`).
        parent: the model this one derives from (LoRA base, distillation teacher,
            quantisation source): a registered model reference, stored as `NAME@vN`, or an
            external one containing ':' (e.g. `hf:sentence-transformers/all-MiniLM-L6-v2`),
            stored as given.
        metrics: the version's metrics, used by promotion gates; default the run's final ones.

    Returns:
        The new version's record.

    Raises:
        InvalidNameError, NotFoundError, InvalidDataError: bad name, parent, run or bundle.
        AlreadyExistsError: `name` is a model of another project.
    """
    validate_name(name, "model name")
    _check_model_project(workspace, name)
    parent_ref = _parent_ref(workspace, parent)
    run = get_run(workspace, handle.run_id)
    digest = log_model_bundle(handle, bundle_dir)
    client = handle.client
    _ensure_registered_model(client, name)
    record = ModelVersionRecord(
        id=new_id(),
        name=name,
        project=workspace.project,
        run_id=run.id,
        dataset_version_id=run.dataset_version_id,
        parent=parent_ref,
        artifact_digest=digest,
        metrics=json_safe(dict(metrics if metrics is not None else run.metrics)),
        created_by=workspace.actor,
    )
    tags = {
        "forgeml.artifact_digest": digest,
        **({"forgeml.parent": parent_ref} if parent_ref else {}),
    }
    created = None
    try:
        with workspace.store.session() as session:
            created = client.create_model_version(
                name,
                source=f"{handle.artifact_uri}/{MODEL_ARTIFACT_PATH}",
                run_id=run.id,
                tags=tags,
                await_creation_for=0,
            )
            record.version = int(created.version)
            session.add(record)
            workspace.audit(session, "model.register", record.ref, _register_payload(record))
    except BaseException as error:
        # nothing half-registered: the MLflow version goes if forgeml's row did not land
        if created is not None:
            client.delete_model_version(name, str(created.version))
        if isinstance(error, sa_exc.IntegrityError):
            raise IntegrityError(
                f"MLflow gave {name} version {record.version}, which forgeml already records; "
                "the MLflow registry and the forgeml store are out of step."
            ) from None
        raise
    return record


def _register_payload(record: ModelVersionRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "digest": record.artifact_digest,
        "parent": record.parent,
        "dataset_version_id": record.dataset_version_id,
    }


def _parent_ref(workspace: Workspace, parent: str | None) -> str | None:
    if parent is None or ":" in parent:
        if parent is not None and len(parent) > 256:
            raise UsageError(f"Parent model reference is {len(parent)} characters; at most 256.")
        return parent
    return get_model_version(workspace, parent).ref


def _ensure_registered_model(client: MlflowClient, name: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.create_registered_model(name)
    except MlflowException as error:
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise


def _check_model_project(workspace: Workspace, name: str) -> None:
    """Refuse a version of a model that belongs to another project (names stay unique
    across projects).

    Raises:
        AlreadyExistsError: `name` is another project's model.
    """
    with workspace.store.session() as session:
        owner = session.scalar(
            select(ModelVersionRecord.project).where(ModelVersionRecord.name == name).limit(1)
        )
    if owner is not None and owner != workspace.project:
        raise AlreadyExistsError(
            f"A model called {name!r} exists already, in the project {owner!r}; pick another name."
        )


def list_models(
    workspace: Workspace, name: str | None = None, *, project: str | None = None
) -> list[ModelVersionRecord]:
    """Registered model versions (all, or those of `name`; of every project, or of
    `project`), by name then version."""
    query = select(ModelVersionRecord).order_by(ModelVersionRecord.name, ModelVersionRecord.version)
    if name is not None:
        query = query.where(ModelVersionRecord.name == name)
    if project is not None:
        query = query.where(ModelVersionRecord.project == project)
    with workspace.store.session() as session:
        return list(session.scalars(query).unique())


def model_aliases(workspace: Workspace, name: str) -> dict[str, int]:
    """The aliases of model `name` and the version each points to (from MLflow)."""
    from mlflow.exceptions import MlflowException

    try:
        model = open_client(workspace).get_registered_model(name)
    except MlflowException as error:
        if error.error_code == "RESOURCE_DOES_NOT_EXIST":
            return {}
        raise
    return {alias: int(version) for alias, version in model.aliases.items()}


def get_model_version(workspace: Workspace, ref: str) -> ModelVersionRecord:
    """The version `ref` names: `NAME` (latest), `NAME@vN`, `NAME@ALIAS` or `NAME@<digest>`.

    Raises:
        NotFoundError: no such model, version or alias.
        UsageError: the reference is malformed, or a digest prefix is ambiguous.
    """
    name, sep, selector = ref.partition("@")
    validate_name(name, "model name")
    versions = list_models(workspace, name)
    if not versions:
        raise NotFoundError(f"Model '{name}' is not registered (see `forgeml models list`).")
    if not sep:
        return versions[-1]
    if match := _VERSION.match(selector):
        return _pick(versions, int(match.group(1)), name)
    if not _ALIAS.match(selector):
        raise UsageError(
            f"Invalid model reference '{ref}': after '@' give vN, an alias or a digest prefix."
        )
    aliases = model_aliases(workspace, name)
    if selector in aliases:
        return _pick(versions, aliases[selector], name)
    if _HEX.match(selector):
        found = [v for v in versions if v.artifact_digest.startswith(selector)]
        if len(found) > 1:
            raise UsageError(
                f"Digest prefix '{selector}' matches {len(found)} versions of '{name}'; "
                "give more characters."
            )
        if found:
            return found[0]
    known = ", ".join(sorted(aliases)) if aliases else "none"
    raise NotFoundError(f"Model '{name}' has no alias '{selector}' (its aliases: {known}).")


def _pick(versions: list[ModelVersionRecord], number: int, name: str) -> ModelVersionRecord:
    for version in versions:
        if version.version == number:
            return version
    raise NotFoundError(
        f"Model '{name}' has no version v{number} "
        f"(its versions are v{versions[0].version}..v{versions[-1].version})."
    )


def promote(
    workspace: Workspace,
    name: str,
    version: int,
    alias: str,
    metric: str,
    mode: Literal["max", "min"] = "max",
    force: bool = False,
    gate: dict[str, Any] | None = None,
    fairness: FairnessBounds | None = None,
) -> Promotion:
    """Point `alias` at `name` version `version` if it beats the current holder on `metric`.

    Args:
        workspace: the registry's workspace.
        name: registered model name.
        version: the candidate version number.
        alias: e.g. `production`.
        metric: the stored metric that decides (e.g. `accuracy`).
        mode: `max` if higher is better, `min` if lower is.
        force: promote even if the candidate does not beat the holder; audited as
            `model.promote.forced` when it overrides the gate.
        gate: the result of a gate the caller ran instead (a pipeline's gate or canary
            step, on the same held-out rows or live traffic): it replaces the comparison
            of stored metrics and is audited with the promotion.
        fairness: bounds on the candidate's fairness metrics (`tracking.fairness`), checked
            whatever `gate` says; the verdict is audited with the promotion.

    Raises:
        NotFoundError: no such model or version.
        UsageError: a bad alias or mode.
        PromotionRejectedError: without force, the candidate lacks `metric` or does not
            beat the holder on it, or breaks a fairness bound (or has no fairness metrics).
    """
    if mode not in ("max", "min"):
        raise UsageError(f"Unknown promotion mode '{mode}': use max or min.")
    validate_alias(alias, max_length=255)  # MLflow's alias column
    candidate = get_model_version(workspace, f"{name}@v{version}")
    aliases = model_aliases(workspace, name)
    holder = _pick(list_models(workspace, name), aliases[alias], name) if alias in aliases else None
    value = _metric(candidate, metric)
    previous_value = _metric(holder, metric) if holder else None
    if holder is not None and holder.version == candidate.version:
        return Promotion(candidate, alias, metric, value, holder.ref, value, False, False)
    rejection = None
    verdict = None
    if fairness is not None and fairness.active:
        verdict = fairness_check(candidate.ref, candidate.metrics, fairness)
        if verdict.rejection is not None:
            rejection = f"{verdict.rejection[:-1]}; pass --force to promote it anyway."
    if gate is None and rejection is None:
        rejection = _gate(candidate, holder, alias, metric, mode, value, previous_value)
    if rejection and not force:
        raise PromotionRejectedError(rejection)
    forced = rejection is not None
    payload: dict[str, Any] = {
        "alias": alias,
        "metric": metric,
        "mode": mode,
        "value": value,
        "previous": holder.ref if holder else None,
        "previous_value": previous_value,
        "overridden": rejection,
    }
    if gate is not None:
        payload["gate"] = gate
    if verdict is not None:
        payload["fairness"] = verdict.as_dict()
    action = "model.promote.forced" if forced else "model.promote"
    with workspace.store.session() as session:
        workspace.audit(session, action, candidate.ref, payload)
        open_client(workspace).set_registered_model_alias(name, alias, str(candidate.version))
    return Promotion(
        candidate,
        alias,
        metric,
        value,
        holder.ref if holder else None,
        previous_value,
        forced,
        True,
        verdict.as_dict() if verdict is not None else None,
    )


def _metric(record: ModelVersionRecord, metric: str) -> float | None:
    value = record.metrics.get(metric)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _gate(
    candidate: ModelVersionRecord,
    holder: ModelVersionRecord | None,
    alias: str,
    metric: str,
    mode: str,
    value: float | None,
    previous_value: float | None,
) -> str | None:
    """Why the candidate may not take the alias, or None if it may."""
    if value is None:
        known = ", ".join(sorted(candidate.metrics)) or "none"
        return (
            f"Model {candidate.ref} has no metric '{metric}' to compare "
            f"(its metrics: {known}); pass --force to promote it anyway."
        )
    if holder is None:
        return None
    if previous_value is None:
        return (
            f"Model {candidate.ref} cannot be compared with {holder.ref} ('{alias}') on "
            f"'{metric}', which {holder.ref} lacks; pass --force to promote it anyway."
        )
    beats = value > previous_value if mode == "max" else value < previous_value
    if beats:
        return None
    better = "higher" if mode == "max" else "lower"
    return (
        f"Model {candidate.ref} was not promoted to '{alias}': its {metric} {value:.6g} does not "
        f"beat {previous_value:.6g} of {holder.ref} ({better} is better); "
        "pass --force to promote it anyway."
    )


def download_bundle(
    workspace: Workspace, record: ModelVersionRecord, dest: Path | None = None
) -> Path:
    """Unpack a version's bundle, its digest verified, into `dest`.

    Args:
        workspace: holds the bundle in its artifact store.
        record: the model version.
        dest: target folder, replaced if present; default `<home>/models/NAME-vN`.

    Returns:
        The folder holding the bundle's files.

    Raises:
        NotFoundError: the bundle is missing from the artifact store.
        IntegrityError: its bytes do not match the recorded digest.
    """
    blob = workspace.artifacts.local_path(record.artifact_digest, verify=True)
    target = dest or workspace.settings.home / "models" / f"{record.name}-v{record.version}"
    return extract_tar(blob, Path(target))


def version_summary(record: ModelVersionRecord, aliases: Mapping[str, int]) -> dict[str, Any]:
    """A model version as `models list|show --json` print it (`aliases`: `model_aliases`)."""
    return {
        "ref": f"{record.name}@v{record.version}",
        "name": record.name,
        "version": record.version,
        "aliases": sorted(a for a, v in aliases.items() if v == record.version),
        "run_id": record.run_id,
        "dataset": record.dataset_version.ref if record.dataset_version else None,
        "parent": record.parent,
        "digest": record.artifact_digest,
        "metrics": record.metrics or {},
        "created_at": record.created_at,
    }


def promotion_summary(result: Promotion) -> dict[str, Any]:
    """What `models promote --json` prints."""
    return {
        "model": f"{result.model.name}@v{result.model.version}",
        "alias": result.alias,
        "metric": result.metric,
        "value": result.value,
        "previous": result.previous,
        "previous_value": result.previous_value,
        "forced": result.forced,
        "changed": result.changed,
        # the fairness gate's verdict, only where bounds were given
        **({"fairness": result.fairness} if result.fairness is not None else {}),
    }
