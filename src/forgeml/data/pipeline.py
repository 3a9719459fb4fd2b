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
from forgeml.data import catalog, fetching
from forgeml.data._parquet import write_frame
from forgeml.data.ingest import IngestOptions, ingest
from forgeml.data.streams import STREAM_OP, replay_stream
from forgeml.data.transforms import get_transform

FEATURE_SPEC_ARTIFACT = "feature_spec"
# how an upload's recipe names its source (`upload:FILENAME`): the file lived only in the
# request, and the artifact store keeps its bytes under the recipe's source_digest
UPLOAD_PREFIX = "upload:"


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
        if source_name is not None and Path(source).is_file():
            # an upload's file does not outlive the request: keep its bytes (their digest is
            # the recipe's source_digest) so that `rebuild` can replay and verify it
            workspace.artifacts.put_file(source)
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

    Raises:
        OtherProjectError: `ref` is a dataset of another project than the workspace's.
    """
    transform = get_transform(op)
    if not isinstance(params, transform.params):
        params = parse_model(transform.params, params, f"{op} recipe")
    with workspace.store.session() as session:
        parent = catalog.resolve_to_read(workspace, session, ref)
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
        if fetching.is_fetched(version):
            fetching.replay(workspace, version, temp)
        elif version.recipe["op"] == "ingest":
            _replay_ingest(workspace, version, temp)
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


def _replay_ingest(workspace: Workspace, version: DatasetVersion, out: Path) -> None:
    params = version.recipe["params"]
    source = _ingested_source(workspace, version)
    if not source.exists():
        raise NotFoundError(f"Cannot rebuild {version.ref}: its source {source} no longer exists.")
    options = parse_model(IngestOptions, params["options"], f"ingest recipe of {version.ref}")
    result = ingest(source, out, options)
    if result.source_digest != params["source_digest"]:
        raise IntegrityError(
            f"Cannot rebuild {version.ref}: its source {source} changed since it was ingested."
        )


def _ingested_source(workspace: Workspace, version: DatasetVersion) -> Path:
    """The file a version was ingested from: its path, or for an upload (`upload:NAME`) the
    bytes the artifact store kept of it."""
    params = version.recipe["params"]
    if not str(params["source"]).startswith(UPLOAD_PREFIX):
        return Path(params["source"])
    digest = params["source_digest"]
    if not workspace.artifacts.exists(digest):
        raise NotFoundError(
            f"Cannot rebuild {version.ref}: it was uploaded ({params['source']}) by a forgeml "
            "that did not keep uploads, so its source bytes are not stored; upload the file "
            "again to make a version that can be rebuilt."
        )
    return workspace.artifacts.local_path(digest)


def _replay_transform(
    workspace: Workspace, version: DatasetVersion, parents: list[DatasetVersion], out: Path
) -> None:
    transform = get_transform(version.recipe["op"])
    params = parse_model(transform.params, version.recipe["params"], f"recipe of {version.ref}")
    output = transform.apply(catalog.read_frame(workspace, parents[0]), params)
    key = version.recipe.get("output")
    write_frame(output.side_frames[key] if key else output.frame, out)


def derived_summary(derived: Derived) -> dict[str, Any]:
    """What `forgeml data TRANSFORM --json` prints of a transform's result (the API answers
    the same)."""
    main = derived.main.version
    summary: dict[str, Any] = {
        "ref": main.ref,
        "digest": main.digest,
        "rows": main.rows,
        "created": derived.main.created,
        "parents": [edge.parent.ref for edge in main.parent_edges],
        "report": derived.report,
        "side_outputs": {
            key: {"ref": item.version.ref, "rows": item.version.rows}
            for key, item in derived.sides.items()
        },
    }
    if derived.feature_spec is not None:
        spec = derived.feature_spec
        summary["feature_spec"] = {"ref": f"{spec.name}@v{spec.version}", "digest": spec.digest}
    return summary
