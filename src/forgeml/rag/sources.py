"""Sources: where an index's text comes from, by an explicit registry of kinds.

A source spec on the command line is a file (txt, md, html, pdf), a folder (read
recursively, every file whose extension a reader knows), or a dataset version's text
column, `dataset:NAME@vN:column`. Each yields `Document`s: one per file, named by the
source's own name and the file's path below it (`docs/sub/a.md`, not where it lies on this
machine), one per non-empty row. A document's `digest` is what incremental indexing
compares: unchanged digest, nothing to do. `register_reader(ext, reader)` adds a file
format.

Files that do not outlive the indexing (a command job's uploads, removed when the job ends)
are kept: `keep_source` stores each file's bytes in the artifact store under its document's
digest (the sha256 of those bytes) and the list of them as one blob, and `kept_source`
reads the same documents back from there, so a rebuild needs neither the files nor their
folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from forgeml.core.errors import IntegrityError, InvalidDataError, MissingColumnError, NotFoundError
from forgeml.core.ids import sha256_bytes
from forgeml.rag._extract import html_text, pdf_text

if TYPE_CHECKING:
    from forgeml.core.artifacts import ArtifactStore
    from forgeml.core.workspace import Workspace

DATASET_PREFIX = "dataset:"


@dataclass(frozen=True)
class Document:
    """One document's extracted text, with what identifies and describes it."""

    source: str
    text: str
    digest: str
    format: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadedSource:
    """A source spec as read now: its documents and one digest over them (for lineage)."""

    spec: str
    kind: str
    digest: str
    documents: tuple[Document, ...]


class SourceKind(Protocol):
    """One kind of source: says whether it reads a spec, and reads it into documents."""

    def matches(self, spec: str) -> bool: ...

    def load(self, spec: str, workspace: Workspace | None) -> list[Document]: ...


FileReader = Callable[[Path], str]


def _decode(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidDataError(f"'{path}' is not UTF-8 text.") from None


def _read_html(path: Path) -> str:
    return html_text(_decode(path))


_READERS: dict[str, tuple[str, FileReader]] = {
    ".txt": ("txt", _decode),
    ".md": ("md", _decode),
    ".markdown": ("md", _decode),
    ".html": ("html", _read_html),
    ".htm": ("html", _read_html),
    ".pdf": ("pdf", pdf_text),
}


def register_reader(extension: str, format_name: str, reader: FileReader) -> None:
    """Read files ending in `extension` (with its dot) with `reader`, as `format_name`."""
    _READERS[extension.lower()] = (format_name, reader)


def _file_document(path: Path, source: str | None = None) -> Document:
    """The document of the file at `path`, named `source` (default: the path), read by the
    reader of its name's extension."""
    name = source or str(path)
    entry = _READERS.get(Path(name).suffix.lower())
    if entry is None:
        known = ", ".join(sorted(_READERS))
        raise InvalidDataError(f"'{name}' is not a format a source reads (one of {known}).")
    format_name, reader = entry
    text = reader(path)
    return Document(name, text, sha256_bytes(path.read_bytes()), format_name)


class FileSource:
    """A single file, read by its extension's reader."""

    def matches(self, spec: str) -> bool:
        return Path(spec).is_file()

    def load(self, spec: str, workspace: Workspace | None) -> list[Document]:
        return [_file_document(Path(spec).resolve())]


class FolderSource:
    """Every file below a folder whose extension a reader knows, in path order."""

    def matches(self, spec: str) -> bool:
        return Path(spec).is_dir()

    def load(self, spec: str, workspace: Workspace | None) -> list[Document]:
        root = Path(spec).resolve()
        paths = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in _READERS)
        return [_file_document(path) for path in paths]


class DatasetSource:
    """The text column of a dataset version: `dataset:NAME@vN:column`, one document a row."""

    def matches(self, spec: str) -> bool:
        return spec.startswith(DATASET_PREFIX)

    def load(self, spec: str, workspace: Workspace | None) -> list[Document]:
        from forgeml.data import catalog

        ref, _, column = spec.removeprefix(DATASET_PREFIX).rpartition(":")
        if not ref or not column:
            raise InvalidDataError(
                f"The source '{spec}' is not of the form dataset:NAME@vN:column."
            )
        if workspace is None:
            raise InvalidDataError(f"The source '{spec}' needs a workspace to read datasets.")
        with workspace.store.session() as session:
            # a dataset of another project is not this workspace's to index, though its
            # name resolves
            version = catalog.resolve_to_read(workspace, session, ref)
            frame = catalog.read_frame(workspace, version)
        if column not in frame.columns:
            raise MissingColumnError(
                f"{version.ref} has no column '{column}' (its columns: {', '.join(frame.columns)})."
            )
        name = version.ref.partition("@")[0]
        return _rows_to_documents(frame.to_dicts(), f"dataset:{name}:{column}", column)


def _rows_to_documents(rows: list[dict[str, Any]], prefix: str, column: str) -> list[Document]:
    documents = []
    for number, row in enumerate(rows):
        text = row.get(column)
        if not isinstance(text, str) or not text.strip():
            continue
        metadata = {
            key: value
            for key, value in row.items()
            if key != column and isinstance(value, str | int | float | bool)
        }
        digest = sha256_bytes(repr((text, sorted(metadata.items()))).encode("utf-8"))
        documents.append(Document(f"{prefix}#{number}", text, digest, "dataset", metadata))
    return documents


_KINDS: dict[str, SourceKind] = {
    "dataset": DatasetSource(),
    "folder": FolderSource(),
    "file": FileSource(),
}


def load_source(
    spec: str, workspace: Workspace | None = None, *, full_paths: bool = False
) -> LoadedSource:
    """Read one source spec.

    A file's document is named by the file's name, a folder's by the folder's name and
    their path below it (`docs/sub/a.md`): the names the caller sees, wherever the files
    are read (a command job reads its uploads from a folder of its own, by those names),
    so the same files give the same names, and digests, here and on a server.
    `full_paths`: name them by their absolute paths instead, as the versions recorded
    before did (`rebuild` of one of those).

    Raises:
        NotFoundError: the file, folder or dataset does not exist.
        InvalidDataError: a file cannot be read (unknown format, unreadable PDF, not UTF-8).
        OtherProjectError: a dataset of another project than the workspace's.
    """
    for kind, reader in _KINDS.items():
        if reader.matches(spec):
            documents = tuple(reader.load(spec, workspace))
            if kind == "dataset":
                return _loaded(spec, kind, documents)
            root = Path(spec).resolve()
            if not full_paths:
                documents = tuple(
                    replace(d, source=Path(d.source).relative_to(root.parent).as_posix())
                    for d in documents
                )
            return _loaded(str(root), kind, documents)
    raise NotFoundError(f"The source '{spec}' does not exist; check the path.")


def _loaded(spec: str, kind: str, documents: tuple[Document, ...]) -> LoadedSource:
    digest = sha256_bytes("\n".join(f"{d.source} {d.digest}" for d in documents).encode())
    return LoadedSource(spec, kind, digest, documents)


def keep_source(loaded: LoadedSource, artifacts: ArtifactStore) -> str:
    """Keep the files of a file or folder source in `artifacts` (see the module's
    docstring); returns the digest of the blob listing them, which `kept_source` reads.

    Raises:
        IntegrityError: a file changed since it was read.
    """
    for document in loaded.documents:
        # a document's name is its path below the source's folder (or an absolute path)
        path = Path(loaded.spec).parent / document.source
        if artifacts.put_file(path) != document.digest:
            raise IntegrityError(
                f"'{document.source}' changed while it was indexed; index it again."
            )
    listed = [[document.source, document.digest] for document in loaded.documents]
    return artifacts.put_bytes(json.dumps(listed).encode())


def kept_source(spec: str, kind: str, kept: str, artifacts: ArtifactStore) -> LoadedSource:
    """The source `spec` as `keep_source` kept it (`kept`: the digest it returned), read
    from `artifacts` alone: the same documents, by the same names, as when it was kept.

    Raises:
        NotFoundError: a kept blob is missing from the artifact store.
        IntegrityError: a kept blob is corrupt.
    """
    listed = json.loads(artifacts.get_bytes(kept))
    documents = tuple(
        _file_document(artifacts.local_path(digest), source) for source, digest in listed
    )
    return _loaded(spec, kind, documents)
