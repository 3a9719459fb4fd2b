"""Dataset versions: resolve references, read rows, record new immutable versions.

A version is one canonical Parquet blob in the artifact store (its digest is the
version's identity) plus a row in the metadata store with its schema, quality profile,
recipe and parents. Recording a version is one transaction with its audit event, so a
failure leaves the store as it was.

The quality profile is a pure function of the blob (and the label column), so it is not
computed on the critical path of `add` / `derive`: a version is recorded with a pending
profile that names its label, and `profile_of` computes the statistics from the verified
blob on first use and stores them in one transaction (a concurrent reader that stored them
first wins, and both see the same). Rows, schema and digest are recorded at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, selectinload

from forgeml.core.errors import AlreadyExistsError, NotFoundError, UsageError
from forgeml.core.ids import Ref, new_id, parse_ref, validate_name
from forgeml.core.store import Dataset, DatasetVersion, FeatureSpecVersion, LineageEdge
from forgeml.core.workspace import Workspace
from forgeml.data import quality
from forgeml.data._frame import SPLIT_COLUMN, SPLIT_NAMES, require_columns

_PENDING = "pending"  # the key that marks a profile not computed yet


@dataclass
class NewVersion:
    """A Parquet file waiting to be recorded as a version of `name`."""

    name: str
    path: Path
    recipe: dict[str, Any]
    parents: Sequence[DatasetVersion] = ()
    report: dict[str, Any] = field(default_factory=dict)
    label: str | None = None


@dataclass
class Recorded:
    """The outcome of recording: the version, and whether it already existed."""

    version: DatasetVersion
    created: bool


def _version_query() -> Any:
    return select(DatasetVersion).options(
        selectinload(DatasetVersion.dataset),
        selectinload(DatasetVersion.parent_edges)
        .selectinload(LineageEdge.parent)
        .selectinload(DatasetVersion.dataset),
    )


def resolve(session: Session, ref: str | Ref) -> DatasetVersion:
    """The version `ref` names: `NAME` (latest), `NAME@vN` or `NAME@<digest prefix>`.

    Raises:
        NotFoundError: no such dataset or version (the message says what exists).
        UsageError: a digest prefix matches several versions.
    """
    parsed = parse_ref(ref, "dataset reference") if isinstance(ref, str) else ref
    dataset = session.scalar(select(Dataset).where(Dataset.name == parsed.name))
    if dataset is None:
        raise NotFoundError(f"Dataset '{parsed.name}' does not exist (see `forgeml data list`).")
    query = _version_query().where(DatasetVersion.dataset_id == dataset.id)
    if parsed.version is not None:
        found = session.scalars(query.where(DatasetVersion.version == parsed.version)).all()
    elif parsed.digest_prefix is not None:
        found = session.scalars(
            query.where(DatasetVersion.digest.startswith(parsed.digest_prefix))
        ).all()
    else:
        found = session.scalars(query.order_by(DatasetVersion.version.desc()).limit(1)).all()
    if not found:
        latest = session.scalar(
            select(func.max(DatasetVersion.version)).where(DatasetVersion.dataset_id == dataset.id)
        )
        raise NotFoundError(
            f"Dataset '{parsed.name}' has no version {str(parsed).partition('@')[2]} "
            f"(its versions are v1..v{latest})."
        )
    if len(found) > 1:
        raise UsageError(
            f"Digest prefix '{parsed.digest_prefix}' matches {len(found)} versions of "
            f"'{parsed.name}'; give more characters."
        )
    return found[0]


def resolve_to_read(workspace: Workspace, session: Session, ref: str | Ref) -> DatasetVersion:
    """The version `ref` names, for a use that reads its rows in the workspace's project
    (training, tuning, evaluation, a transform, a pipeline's data step, `data head|export`,
    a RAG dataset source, `prompts eval --data`, a drift check's reference): a dataset of
    another project is not this workspace's to read, though its name resolves.

    Raises:
        NotFoundError, UsageError: as `resolve`.
        OtherProjectError: the dataset belongs to another project than the workspace's.
    """
    version = resolve(session, ref)
    check_readable(workspace, version)
    return version


def check_readable(workspace: Workspace, version: DatasetVersion) -> None:
    """Refuse to read `version`'s rows from a workspace of another project.

    Raises:
        OtherProjectError: the version's dataset belongs to another project.
    """
    workspace.check_own("Dataset", version.dataset.name, version.dataset.project)


def latest_versions() -> Select[Dataset, DatasetVersion]:
    """Every dataset with its latest version, unordered (callers order and page it)."""
    latest = (
        select(DatasetVersion.dataset_id, func.max(DatasetVersion.version).label("v"))
        .group_by(DatasetVersion.dataset_id)
        .subquery()
    )
    return (
        select(Dataset, DatasetVersion)
        .join(latest, latest.c.dataset_id == Dataset.id)
        .join(
            DatasetVersion,
            (DatasetVersion.dataset_id == Dataset.id) & (DatasetVersion.version == latest.c.v),
        )
    )


def list_datasets(
    session: Session, project: str = "default"
) -> list[tuple[Dataset, DatasetVersion]]:
    """Every dataset of `project` with its latest version, by name."""
    query = latest_versions().where(Dataset.project == project).order_by(Dataset.name)
    rows = session.execute(query).all()
    return [(row[0], row[1]) for row in rows]


def versions_query(session: Session, name: str) -> Select[DatasetVersion]:
    """The versions of dataset `name`, unordered (callers order and page it).

    Raises:
        NotFoundError: no dataset has that name.
    """
    validate_name(name, "dataset name")
    dataset = session.scalar(select(Dataset).where(Dataset.name == name))
    if dataset is None:
        raise NotFoundError(f"Dataset '{name}' does not exist (see `forgeml data list`).")
    query: Select[DatasetVersion] = _version_query().where(DatasetVersion.dataset_id == dataset.id)
    return query


def versions_of(session: Session, name: str) -> list[DatasetVersion]:
    """All versions of dataset `name`, oldest first."""
    return list(session.scalars(versions_query(session, name).order_by(DatasetVersion.version)))


def version_summary(version: DatasetVersion) -> dict[str, Any]:
    """The JSON form of a version that every command and route answers."""
    return {
        "ref": version.ref,
        "dataset": version.dataset.name,
        "version": version.version,
        "digest": version.digest,
        "rows": version.rows,
        "size_bytes": version.size_bytes,
        "created_at": version.created_at,
        "created_by": version.created_by,
        "op": version.recipe.get("op"),
        "parents": [edge.parent.ref for edge in version.parent_edges],
    }


def recorded_summary(recorded: Recorded) -> dict[str, Any]:
    """What `data add` answers: the version, whether it is new, and its ingest report."""
    return version_summary(recorded.version) | {
        "created": recorded.created,
        "report": recorded.version.report,
    }


def describe(workspace: Workspace, ref: str) -> dict[str, Any]:
    """What `data show` answers: the version's summary, schema, recipe, report, quality
    profile (computed on first use) and the versions derived from it."""
    with workspace.store.session() as session:
        version = resolve(session, ref)
        children = [child.ref for child in children_of(session, version)]
    return version_summary(version) | {
        "schema": version.schema,
        "recipe": version.recipe,
        "report": version.report,
        "profile": profile_of(workspace, version),
        "children": children,
    }


def children_of(session: Session, version: DatasetVersion) -> list[DatasetVersion]:
    """Versions derived directly from `version`."""
    return list(
        session.scalars(
            _version_query()
            .join(LineageEdge, LineageEdge.child_id == DatasetVersion.id)
            .where(LineageEdge.parent_id == version.id)
        )
    )


def parquet_path(workspace: Workspace, version: DatasetVersion) -> Path:
    """A local path to the version's Parquet blob, its digest verified."""
    return workspace.artifacts.local_path(version.digest)


def read_frame(
    workspace: Workspace, version: DatasetVersion, split: str | None = None
) -> pl.DataFrame:
    """The version's rows, optionally one named split of them."""
    path = parquet_path(workspace, version)
    if split is None:
        return pl.read_parquet(path)
    if split not in SPLIT_NAMES:
        raise UsageError(f"Unknown split '{split}': choose one of {', '.join(SPLIT_NAMES)}.")
    if SPLIT_COLUMN not in version.schema:
        raise UsageError(
            f"{version.ref} has no splits; run `forgeml data split {version.ref}` first."
        )
    return pl.scan_parquet(path).filter(pl.col(SPLIT_COLUMN) == split).collect()


def _existing(session: Session, name: str, digest: str) -> DatasetVersion | None:
    return session.scalars(
        _version_query()
        .join(Dataset, Dataset.id == DatasetVersion.dataset_id)
        .where(Dataset.name == name, DatasetVersion.digest == digest)
        .order_by(DatasetVersion.version)
        .limit(1)
    ).first()


@dataclass
class Prepared:
    """A new version's blob stored and described, ready to record."""

    new: NewVersion
    digest: str
    rows: int
    size_bytes: int
    schema: dict[str, str]
    profile: dict[str, Any]


def prepare(workspace: Workspace, new: NewVersion, frame: pl.DataFrame | None = None) -> Prepared:
    """Store the blob, outside any transaction; its profile stays pending (see `profile_of`).

    Args:
        workspace: where the blob goes.
        new: the version to prepare. Its file is moved into the store when it is one of the
            store's temporary files (`local_tempfile`): do not use it afterwards.
        frame: the rows already in memory, if the caller has them; otherwise only the
            file's Parquet metadata is read (rows and schema), never its rows.

    Raises:
        MissingColumnError: `new.label` is not a column (nothing is stored then).
    """
    validate_name(new.name, "dataset name")
    if frame is None:
        schema = pl.read_parquet_schema(new.path)
        rows = int(pl.scan_parquet(new.path).select(pl.len()).collect().item())
    else:
        schema, rows = dict(frame.schema), frame.height
    # checked before the blob is stored: a failure must not leave a stored blob
    if new.label is not None:
        require_columns(pl.DataFrame(schema=schema), [new.label], "The label")
    label = new.label or quality.guess_label(list(schema))
    size_bytes = new.path.stat().st_size
    return Prepared(
        new=new,
        digest=workspace.artifacts.put_file(new.path, move=True),
        rows=rows,
        size_bytes=size_bytes,
        schema={name: str(dtype) for name, dtype in schema.items()},
        profile={_PENDING: True, "label": label},
    )


def is_profiled(version: DatasetVersion) -> bool:
    """Whether the version's quality profile has been computed and stored."""
    return not version.profile.get(_PENDING, False)


def profile_of(workspace: Workspace, version: DatasetVersion) -> dict[str, Any]:
    """The version's quality profile (see `quality.profile`), computed on first use.

    A pending profile is computed from the version's blob (its digest verified), reusing
    the statistics of unchanged columns from any parent whose profile is stored, then
    stored with the version in one transaction; `version.profile` is updated too.
    """
    if is_profiled(version):
        return version.profile
    label = version.profile.get("label")
    known = [edge.parent.profile for edge in version.parent_edges if is_profiled(edge.parent)]
    computed = quality.profile(read_frame(workspace, version), label, known=known)
    # a write even when a read (a GET, `data show`) asked for the profile
    with workspace.store.session(write=True) as session:
        row = session.get(DatasetVersion, version.id)
        if row is None:
            raise NotFoundError(f"Dataset version {version.ref} no longer exists.")
        if is_profiled(row):
            computed = row.profile  # a concurrent reader stored it first: keep one answer
        else:
            row.profile = computed
    version.profile = computed
    return computed


def record(workspace: Workspace, session: Session, prepared: Prepared) -> Recorded:
    """Record `prepared` as the next version of its dataset, unless identical content exists.

    Runs inside the caller's transaction, together with its audit event.
    """
    new = prepared.new
    dataset = session.scalar(select(Dataset).where(Dataset.name == new.name))
    if dataset is not None and dataset.project != workspace.project:
        # names stay unique across projects: a version goes to its dataset's own project
        raise AlreadyExistsError(
            f"A dataset called {new.name!r} exists already, in the project "
            f"{dataset.project!r}; pick another name."
        )
    existing = _existing(session, new.name, prepared.digest)
    if existing is not None:
        return Recorded(existing, created=False)
    if dataset is None:
        dataset = Dataset(
            id=new_id(), name=new.name, project=workspace.project, created_by=workspace.actor
        )
        session.add(dataset)
        session.flush()
    last = session.scalar(
        select(func.max(DatasetVersion.version)).where(DatasetVersion.dataset_id == dataset.id)
    )
    version = DatasetVersion(
        id=new_id(),
        dataset=dataset,
        version=(last or 0) + 1,
        digest=prepared.digest,
        rows=prepared.rows,
        size_bytes=prepared.size_bytes,
        schema=prepared.schema,
        profile=prepared.profile,
        recipe=new.recipe,
        report=new.report,
        created_by=workspace.actor,
    )
    session.add(version)
    session.flush()
    for position, parent in enumerate(new.parents):
        session.add(LineageEdge(child_id=version.id, position=position, parent_id=parent.id))
    session.flush()
    workspace.audit(
        session,
        "data.version.create",
        version.ref,
        {
            "digest": prepared.digest,
            "op": new.recipe.get("op"),
            "parents": [parent.ref for parent in new.parents],
        },
    )
    # reload with parents eagerly loaded: callers use it after the session closes
    loaded = session.scalars(
        _version_query()
        .where(DatasetVersion.id == version.id)
        .execution_options(populate_existing=True)
    ).one()
    return Recorded(loaded, created=True)


def record_feature_spec(
    workspace: Workspace, session: Session, name: str, document: bytes, source: DatasetVersion
) -> FeatureSpecVersion:
    """Store a fitted FeatureSpec as the next version of `name` (same bytes: same version)."""
    validate_name(name, "feature spec name")
    digest = workspace.artifacts.put_bytes(document)
    existing = session.scalar(
        select(FeatureSpecVersion).where(
            FeatureSpecVersion.name == name, FeatureSpecVersion.digest == digest
        )
    )
    if existing is not None:
        return existing
    last = session.scalar(
        select(func.max(FeatureSpecVersion.version)).where(FeatureSpecVersion.name == name)
    )
    spec = FeatureSpecVersion(
        id=new_id(),
        name=name,
        version=(last or 0) + 1,
        digest=digest,
        dataset_version_id=source.id,
        created_by=workspace.actor,
    )
    session.add(spec)
    session.flush()
    workspace.audit(
        session,
        "data.feature_spec.create",
        f"{name}@v{spec.version}",
        {"digest": digest, "dataset": source.ref},
    )
    return spec


def resolve_feature_spec(session: Session, ref: str) -> FeatureSpecVersion:
    """The FeatureSpec version `ref` names (`NAME`, `NAME@vN`, `NAME@<digest>`)."""
    parsed = parse_ref(ref, "feature spec reference")
    query = select(FeatureSpecVersion).where(FeatureSpecVersion.name == parsed.name)
    if parsed.version is not None:
        query = query.where(FeatureSpecVersion.version == parsed.version)
    elif parsed.digest_prefix is not None:
        query = query.where(FeatureSpecVersion.digest.startswith(parsed.digest_prefix))
    spec = session.scalars(query.order_by(FeatureSpecVersion.version.desc()).limit(1)).first()
    if spec is None:
        raise NotFoundError(f"Feature spec '{ref}' does not exist.")
    return spec
