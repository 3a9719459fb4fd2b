"""RAG index versions: build a snapshot from sources, resolve references, open, rebuild.

`build_version` reads the sources, brings a copy of the latest snapshot's file up to them
incrementally (or starts an empty one when there is none or its config differs), compacts
it, and records it as the next version: the index file goes into the artifact store first
(content-addressed, so a crash leaves at most an unreferenced blob), then the version row
and its audit event in one transaction. The same content and config make the same digest,
and then no new version.

A source whose files do not outlive the build (`uploads`: a command job's folder, removed
when the job ends) is kept in the artifact store before the version is recorded, and its
lineage names the kept list (`"kept"`), which `rebuild` reads instead of the gone folder;
its documents keep their names (the folder's name and their path below it, as any build
names them: `forgeml.rag.sources.load_source`), so the digests are those of a build of the
same files on the caller's machine.

An index belongs to the project it was first built in (`Workspace.project`); its name stays
unique across projects. A list shows the workspace's project's indexes; an item is found by
name (`resolve`, `find_index`: the API authorizes it in its own project); what builds a
version of one or uses one (`resolve_own`, `open_index`, `rebuild`: `rag answer|eval|query`,
agents' `rag_search`, `forgeml serve --rag`, `deploy --rag`) must act in its project.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forgeml.core.errors import (
    AlreadyExistsError,
    IntegrityError,
    InvalidDataError,
    NotFoundError,
    UsageError,
)
from forgeml.core.ids import new_id, parse_ref, validate_name
from forgeml.core.store import RagIndexRecord, RagIndexVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.rag.chunking import ChunkerConfig
from forgeml.rag.dense import DenseConfig
from forgeml.rag.embeddings import Embedder, default_embedder
from forgeml.rag.index import Index, UpdateStats
from forgeml.rag.options import IndexOptions
from forgeml.rag.sources import Document, LoadedSource, keep_source, kept_source, load_source


@dataclass(frozen=True)
class Built:
    """The outcome of `build_version`: the version, whether it is new, what was done."""

    version: RagIndexVersionRecord
    created: bool
    stats: UpdateStats


def _documents(loaded: Sequence[LoadedSource]) -> list[Document]:
    """The sources' documents, each name once.

    Raises:
        UsageError: two sources hold different documents of one name (`docs/a.md` of two
            folders named `docs`).
    """
    seen: dict[str, Document] = {}
    for source in loaded:
        for document in source.documents:
            first = seen.setdefault(document.source, document)
            if first.digest != document.digest:
                raise UsageError(
                    f"Two different files are named {document.source}: a document is named by "
                    "its folder's name and its path below it; rename one folder."
                )
    return list(seen.values())


def _fill(
    workspace: Workspace,
    path: Path,
    documents: Sequence[Document],
    configs: tuple[ChunkerConfig, DenseConfig],
    embedder: Embedder,
    previous: RagIndexVersionRecord | None,
) -> tuple[Index, UpdateStats]:
    """Build the index file at `path`: from `previous`'s when its config matches."""
    index = Index.create(path, embedder, *configs)
    if previous is not None and previous.config == index.config:
        index.close()
        shutil.copyfile(workspace.artifacts.local_path(previous.artifact), path)
        index = Index.open(path, embedder, writable=True)
    stats = index.update(documents)
    index.compact()
    if not index.file.live_count():
        index.close()
        raise InvalidDataError("The sources hold no text to index (the corpus is empty).")
    return index, stats


def build_version(
    workspace: Workspace,
    name: str,
    specs: Sequence[str],
    options: IndexOptions | None = None,
    embedder: Embedder | None = None,
    *,
    uploads: Path | None = None,
) -> Built:
    """Index `specs` as the next version of `name` (see the module's docstring).

    `uploads` is a folder that does not outlive the build (a command job's scratch): the
    files and folders below it are kept in the artifact store, for `rebuild`.

    Raises:
        NotFoundError: a source does not exist.
        InvalidDataError: a source cannot be read, or they hold no text.
        OtherProjectError: a source is a dataset of another project than the workspace's.
        AlreadyExistsError: an index of another project has that name (checked before
            anything is read or embedded).
    """
    validate_name(name, "index name")
    options = options or IndexOptions()
    embedder = embedder or default_embedder()
    if not specs:
        raise UsageError("Give at least one source to index.")
    with workspace.store.session() as session:
        _refuse_other_project(session, workspace, name)
    loaded = [load_source(spec, workspace) for spec in specs]
    with workspace.store.session() as session:
        previous = _latest(session, name)
    with workspace.artifacts.local_tempfile(suffix=".sqlite") as path:
        configs = (options.chunker(), options.dense())
        index, stats = _fill(workspace, path, _documents(loaded), configs, embedder, previous)
        digest, config, chunks = index.digest(), index.config, index.file.live_count()
        documents = len(index.file.documents())
        index.close()
        if previous is not None and previous.digest == digest:
            return Built(previous, False, stats)
        artifact = workspace.artifacts.put_file(path, move=True)
    lineage = [_lineage(workspace, source, uploads) for source in loaded]
    fields = {"digest": digest, "artifact": artifact, "chunks": chunks, "documents": documents}
    version = _record_version(workspace, name, config, lineage, stats, **fields)
    return Built(version, True, stats)


def _lineage(workspace: Workspace, source: LoadedSource, uploads: Path | None) -> dict[str, str]:
    """What a version records of a source: its spec, kind and digest, and for one below
    `uploads` the digest of its kept files (`keep_source`)."""
    entry = {"spec": source.spec, "kind": source.kind, "digest": source.digest}
    if source.kind in ("file", "folder"):
        entry["names"] = _NAMED_BELOW_SOURCE
    below = uploads is not None and Path(source.spec).is_relative_to(uploads.resolve())
    if below and source.kind in ("file", "folder"):
        entry["kept"] = keep_source(source, workspace.artifacts)
    return entry


# a recorded file or folder source whose documents are named by the source's name and their
# path below it (`load_source`); one recorded before without it named them by full paths
_NAMED_BELOW_SOURCE = "below-source"


def _reload(workspace: Workspace, source: dict[str, str]) -> LoadedSource:
    """A recorded source read again (by the names it was read by): from the artifact store
    when it was kept."""
    if "kept" in source:
        return kept_source(source["spec"], source["kind"], source["kept"], workspace.artifacts)
    full_paths = source["kind"] != "dataset" and source.get("names") != _NAMED_BELOW_SOURCE
    return load_source(source["spec"], workspace, full_paths=full_paths)


def _record_version(
    workspace: Workspace,
    name: str,
    config: dict[str, Any],
    lineage: list[dict[str, str]],
    stats: UpdateStats,
    **fields: Any,
) -> RagIndexVersionRecord:
    """The next version's row and its audit event, in one transaction."""
    with workspace.store.session() as session:
        record = _record(session, workspace, name)
        number = session.scalar(
            select(func.max(RagIndexVersionRecord.version)).where(
                RagIndexVersionRecord.index_id == record.id
            )
        )
        version = RagIndexVersionRecord(
            id=new_id(),
            index_id=record.id,
            version=(number or 0) + 1,
            config=config,
            sources=lineage,
            stats=asdict(stats),
            created_by=workspace.actor,
            **fields,
        )
        version.index = record
        session.add(version)
        session.flush()
        payload = {"digest": fields["digest"], "artifact": fields["artifact"], "sources": lineage}
        workspace.audit(session, "rag.index", version.ref, payload)
    return version


def _record(session: Session, workspace: Workspace, name: str) -> RagIndexRecord:
    """Index `name`'s row, created in the workspace's project when there is none."""
    _refuse_other_project(session, workspace, name)
    record = session.scalar(select(RagIndexRecord).where(RagIndexRecord.name == name))
    if record is None:
        record = RagIndexRecord(
            id=new_id(), name=name, project=workspace.project, created_by=workspace.actor
        )
        session.add(record)
        session.flush()
    return record


def _refuse_other_project(session: Session, workspace: Workspace, name: str) -> None:
    found = session.scalar(select(RagIndexRecord.project).where(RagIndexRecord.name == name))
    if found is not None and found != workspace.project:
        # names stay unique across projects: a version goes to its index's own project
        raise AlreadyExistsError(
            f"A RAG index called {name!r} exists already, in the project {found!r}; "
            "pick another name."
        )


def _latest(session: Session, name: str) -> RagIndexVersionRecord | None:
    return session.scalars(
        select(RagIndexVersionRecord)
        .join(RagIndexRecord)
        .where(RagIndexRecord.name == name)
        .order_by(RagIndexVersionRecord.version.desc())
        .limit(1)
    ).first()


def versions_of(session: Session, name: str) -> list[RagIndexVersionRecord]:
    """Every version of index `name`, oldest first.

    Raises:
        NotFoundError: no such index.
    """
    validate_name(name, "index name")
    found = list(
        session.scalars(
            select(RagIndexVersionRecord)
            .join(RagIndexRecord)
            .where(RagIndexRecord.name == name)
            .order_by(RagIndexVersionRecord.version)
        )
    )
    if not found:
        raise NotFoundError(f"RAG index '{name}' does not exist (see `forgeml rag index`).")
    return found


def latest_versions(session: Session, project: str) -> list[tuple[str, RagIndexVersionRecord]]:
    """(name, latest version) of every index of `project`, by name."""
    newest = (
        select(
            RagIndexVersionRecord.index_id,
            func.max(RagIndexVersionRecord.version).label("version"),
        )
        .group_by(RagIndexVersionRecord.index_id)
        .subquery()
    )
    rows = session.execute(
        select(RagIndexRecord.name, RagIndexVersionRecord)
        .join(RagIndexVersionRecord, RagIndexVersionRecord.index_id == RagIndexRecord.id)
        .join(
            newest,
            (newest.c.index_id == RagIndexVersionRecord.index_id)
            & (newest.c.version == RagIndexVersionRecord.version),
        )
        .where(RagIndexRecord.project == project)
        .order_by(RagIndexRecord.name)
    ).all()
    return [(name, version) for name, version in rows]


def resolve(session: Session, ref: str) -> RagIndexVersionRecord:
    """The version `ref` names: `NAME` (latest), `NAME@vN` or `NAME@<digest prefix>`, in
    whichever project (an item read: the API authorizes it in the index's project).

    Raises:
        NotFoundError: no such index or version.
        UsageError: a digest prefix matches several versions.
    """
    parsed = parse_ref(ref, "index reference")
    versions = versions_of(session, parsed.name)
    if parsed.version is not None:
        found = [v for v in versions if v.version == parsed.version]
    elif parsed.digest_prefix is not None:
        found = [v for v in versions if v.digest.startswith(parsed.digest_prefix)]
    else:
        found = versions[-1:]
    if not found:
        raise NotFoundError(
            f"RAG index '{parsed.name}' has no version {str(parsed).partition('@')[2]} "
            f"(its versions are v1..v{versions[-1].version})."
        )
    if len(found) > 1:
        raise UsageError(f"Digest prefix '{parsed.digest_prefix}' matches {len(found)} versions.")
    return found[0]


def resolve_own(session: Session, workspace: Workspace, ref: str) -> RagIndexVersionRecord:
    """The version `ref` names, of an index of the workspace's project: what a use of it
    (a search, an answer, a server or deployment serving it) reads.

    Raises:
        NotFoundError: no such index or version.
        UsageError: a digest prefix matches several versions.
        OtherProjectError: the index belongs to another project.
    """
    version = resolve(session, ref)
    workspace.check_own("RAG index", version.index.name, version.index.project)
    return version


def open_index(workspace: Workspace, ref: str, embedder: Embedder | None = None) -> Index:
    """The snapshot `ref` names, of an index of the workspace's project, opened read-only
    for search (close it when done).

    Raises:
        NotFoundError: no such index or version, or its file is missing.
        OtherProjectError: the index belongs to another project.
    """
    with workspace.store.session() as session:
        version = resolve_own(session, workspace, ref)
    return _open(workspace, version, embedder)


def find_index(workspace: Workspace, ref: str, embedder: Embedder | None = None) -> Index:
    """The snapshot `ref` names, in whichever project, opened read-only (an item read: the
    API authorizes it in the index's project).

    Raises:
        NotFoundError: no such index or version, or its file is missing.
    """
    with workspace.store.session() as session:
        version = resolve(session, ref)
    return _open(workspace, version, embedder)


def _open(workspace: Workspace, version: RagIndexVersionRecord, embedder: Embedder | None) -> Index:
    return Index.open(
        workspace.artifacts.local_path(version.artifact), embedder or default_embedder()
    )


def rebuild(
    workspace: Workspace, ref: str, embedder: Embedder | None = None
) -> tuple[RagIndexVersionRecord, str]:
    """Build `ref` again from its recorded sources, fresh, and check its digest.

    Returns:
        The version and the rebuilt digest (equal to the version's).

    Raises:
        IntegrityError: the rebuilt index differs (a source changed since).
        OtherProjectError: the index belongs to another project.
    """
    with workspace.store.session() as session:
        version = resolve_own(session, workspace, ref)
    embedder = embedder or default_embedder()
    loaded = [_reload(workspace, source) for source in version.sources]
    # the recorded config, read back as Index.open reads its own file's settings
    configs = (ChunkerConfig(**version.config["chunker"]), DenseConfig(**version.config["dense"]))
    with workspace.artifacts.local_tempfile(suffix=".sqlite") as path:
        index, _ = _fill(workspace, path, _documents(loaded), configs, embedder, None)
        digest = index.digest()
        index.close()
    if digest != version.digest:
        changed = [
            s["spec"]
            for s, now in zip(version.sources, loaded, strict=True)
            if s["digest"] != now.digest
        ]
        raise IntegrityError(
            f"Rebuilding {version.ref} gives digest {digest[:12]}, not {version.digest[:12]}: "
            f"{', '.join(changed) or 'the chunker or embedder'} changed since it was built."
        )
    return version, digest


def describe(version: RagIndexVersionRecord) -> dict[str, Any]:
    """A version as JSON-ready data (what `rag show --json` prints)."""
    return {
        "ref": version.ref,
        "project": version.index.project,
        "version": version.version,
        "digest": version.digest,
        "artifact": version.artifact,
        "chunks": version.chunks,
        "documents": version.documents,
        "config": version.config,
        "sources": version.sources,
        "stats": version.stats,
        "created_at": version.created_at.isoformat(),
        "created_by": version.created_by,
    }
