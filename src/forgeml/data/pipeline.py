"""Operations that create versions: ingest a file, derive through a transform, rebuild.

Each writes its Parquet output to a temporary file first, then records every resulting
version (main, side outputs, FeatureSpec) in one transaction: all or nothing.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from forgeml.core.artifacts import file_digest
from forgeml.core.configfile import parse_model
from forgeml.core.errors import IntegrityError, NotFoundError
from forgeml.core.ids import canonical_json, validate_name
from forgeml.core.store import DatasetVersion, FeatureSpecVersion
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.data._parquet import write_frame
from forgeml.data.ingest import IngestOptions, ingest
from forgeml.data.streams import STREAM_OP, replay_stream
from forgeml.data.transforms import get_transform

FEATURE_SPEC_ARTIFACT = "feature_spec"


@dataclass
class Derived:
    """What a transform recorded."""

    main: catalog.Recorded
    sides: dict[str, catalog.Recorded] = field(default_factory=dict)
    feature_spec: FeatureSpecVersion | None = None
    report: dict[str, Any] = field(default_factory=dict)


def add(
    workspace: Workspace,
    name: str,
    source: Path,
    options: IngestOptions,
    label: str | None = None,
    *,
    source_name: str | None = None,
) -> catalog.Recorded:
    """Ingest `source` as a new version of dataset `name` (or return the identical one).

    `source_name` is what the recipe records as the source instead of `source`'s path (an
    upload's file name: its temporary file does not outlive the call).
    """
    validate_name(name, "dataset name")
    with workspace.artifacts.local_tempfile(suffix=".parquet") as temp:
        result = ingest(source, temp, options)
        recipe = {
            "op": "ingest",
            "params": {
                "source": source_name or str(Path(source).resolve()),
                "source_digest": result.source_digest,
                "options": result.resolved.model_dump(mode="json"),
            },
        }
        report = {
            "format": result.format,
            "rows": result.rows,
            "bad_row_count": result.bad_row_count,
            "bad_rows": result.bad_rows,
        }
        prepared = catalog.prepare(
            workspace, catalog.NewVersion(name, temp, recipe, report=report, label=label)
        )
        with workspace.store.session() as session:
            return catalog.record(workspace, session, prepared)


def derive(
    workspace: Workspace,
    op: str,
    ref: str,
    params: BaseModel | dict[str, Any],
    *,
    name: str | None = None,
    spec_name: str | None = None,
) -> Derived:
    """Apply transform `op` to version `ref`, recording the outputs as new versions.

    Args:
        workspace: where to read and record.
        op: a registered transform name (`clean`, `validate`, `redact`, `split`, ...).
        ref: the parent version.
        params: the transform's params (model or plain dict, validated here).
        name: the dataset to record into; default the parent's dataset (for `features`,
            `<parent>-features`).
        spec_name: for `features`, the FeatureSpec name; default the dataset's name.
    """
    transform = get_transform(op)
    if not isinstance(params, transform.params):
        params = parse_model(transform.params, params, f"{op} recipe")
    with workspace.store.session() as session:
        parent = catalog.resolve(session, ref)
    target = validate_name(name or parent.dataset.name + transform.output_suffix, "dataset name")
    if spec_name is not None:
        validate_name(spec_name, "feature spec name")
    output = transform.apply(catalog.read_frame(workspace, parent), params)
    recipe = {"op": op, "params": params.model_dump(mode="json")}
    frames = {"": output.frame, **output.side_frames}
    with ExitStack() as stack:
        prepared = {}
        for key, frame in frames.items():
            path = stack.enter_context(workspace.artifacts.local_tempfile(".parquet"))
            write_frame(frame, path)
            new = catalog.NewVersion(
                f"{target}-{key}" if key else target,
                path,
                {**recipe, "output": key} if key else recipe,
                [parent],
                output.report if not key else {},
            )
            prepared[key] = catalog.prepare(workspace, new, frame)
        with workspace.store.session() as session:
            parent = catalog.resolve(session, parent.ref)
            for item in prepared.values():
                item.new.parents = [parent]
            recorded = {
                key: catalog.record(workspace, session, item) for key, item in prepared.items()
            }
            spec = None
            if FEATURE_SPEC_ARTIFACT in output.artifacts:
                document = canonical_json(output.artifacts[FEATURE_SPEC_ARTIFACT])
                spec = catalog.record_feature_spec(
                    workspace,
                    session,
                    spec_name or target,
                    document,
                    recorded[""].version,
                )
    main = recorded.pop("")
    return Derived(main, recorded, spec, output.report)


@dataclass
class Rebuilt:
    ref: str
    expected: str
    actual: str


def rebuild(workspace: Workspace, ref: str) -> Rebuilt:
    """Re-derive `ref` from its parents (or its source file) and compare digests.

    Raises:
        IntegrityError: the rebuilt bytes differ from the recorded version.
        NotFoundError: an ingested version whose source file is gone.
    """
    with workspace.store.session() as session:
        version = catalog.resolve(session, ref)
        parents = [edge.parent for edge in version.parent_edges]
    with workspace.artifacts.local_tempfile(suffix=".parquet") as temp:
        if version.recipe["op"] == "ingest":
            _replay_ingest(version, temp)
        elif version.recipe["op"] == STREAM_OP:
            replay_stream(workspace, version, temp)  # from the raw messages it kept
        else:
            _replay_transform(workspace, version, parents, temp)
        actual = file_digest(temp)
    if actual != version.digest:
        raise IntegrityError(
            f"Rebuilding {version.ref} gave digest {actual[:12]}, "
            f"not the recorded {version.digest[:12]}: its lineage does not reproduce it."
        )
    return Rebuilt(version.ref, version.digest, actual)


def _replay_ingest(version: DatasetVersion, out: Path) -> None:
    params = version.recipe["params"]
    source = Path(params["source"])
    if not source.exists():
        raise NotFoundError(f"Cannot rebuild {version.ref}: its source {source} no longer exists.")
    options = parse_model(IngestOptions, params["options"], f"ingest recipe of {version.ref}")
    result = ingest(source, out, options)
    if result.source_digest != params["source_digest"]:
        raise IntegrityError(
            f"Cannot rebuild {version.ref}: its source {source} changed since it was ingested."
        )


def _replay_transform(
    workspace: Workspace, version: DatasetVersion, parents: list[DatasetVersion], out: Path
) -> None:
    transform = get_transform(version.recipe["op"])
    params = parse_model(transform.params, version.recipe["params"], f"recipe of {version.ref}")
    output = transform.apply(catalog.read_frame(workspace, parents[0]), params)
    key = version.recipe.get("output")
    write_frame(output.side_frames[key] if key else output.frame, out)
