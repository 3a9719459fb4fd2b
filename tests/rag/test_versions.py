from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from forgeml.core.errors import IntegrityError, InvalidDataError, NotFoundError, UsageError
from forgeml.core.store import AuditEvent, RagIndexRecord
from forgeml.core.workspace import Workspace
from forgeml.rag import IndexOptions, build_version, open_index, rebuild, resolve
from forgeml.rag.embeddings import MiniLMEmbedder

OPTIONS = IndexOptions(chunk_tokens=64, overlap=8)
HEAPQ = "# heapq\n\nHeap queue algorithm, also known as the priority queue algorithm."
BISECT = "# bisect\n\nBisection algorithms keep a list in sorted order after each insertion."


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "heapq.md").write_text(HEAPQ, encoding="utf-8")
    (folder / "bisect.md").write_text(BISECT, encoding="utf-8")
    return folder


def test_an_unchanged_corpus_makes_no_new_version_and_no_embedding(
    workspace: Workspace, corpus: Path, embedder: MiniLMEmbedder
) -> None:
    first = build_version(workspace, "docs", [str(corpus)], OPTIONS, embedder)
    assert (first.version.ref, first.created, first.version.chunks) == ("docs@v1", True, 2)
    before = embedder.embedded
    again = build_version(workspace, "docs", [str(corpus)], OPTIONS, embedder)
    assert (again.version.ref, again.created, again.stats.embedded) == ("docs@v1", False, 0)
    assert embedder.embedded == before


def test_a_change_makes_a_new_version_and_the_old_one_is_immutable(
    workspace: Workspace, corpus: Path, embedder: MiniLMEmbedder
) -> None:
    v1 = build_version(workspace, "docs", [str(corpus)], OPTIONS, embedder).version
    (corpus / "heapq.md").write_text(HEAPQ.replace("priority queue", "binary heap"), "utf-8")
    (corpus / "bisect.md").unlink()
    built = build_version(workspace, "docs", [str(corpus)], OPTIONS, embedder)
    assert built.version.ref == "docs@v2"
    assert (built.stats.documents_changed, built.stats.documents_removed) == (1, 1)
    assert built.version.sources[0]["digest"] != v1.sources[0]["digest"]
    assert built.version.config["embedder"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    old, new = open_index(workspace, "docs@v1", embedder), open_index(workspace, "docs", embedder)
    assert {h.source.rsplit("/", 1)[1] for h in old.search("sorted list", 5, "bm25")} == {
        "bisect.md"
    }
    assert new.search("sorted list", 5, "bm25") == []
    assert "binary heap" in new.search("heap", 1)[0].text
    old.close()
    new.close()
    with workspace.store.session() as session:
        assert resolve(session, f"docs@{v1.digest[:8]}").version == 1
        events = session.scalars(select(AuditEvent).where(AuditEvent.action == "rag.index")).all()
    assert [e.object_ref for e in events] == ["docs@v1", "docs@v2"]


def test_rebuild_proves_the_digest_and_catches_a_changed_source(
    workspace: Workspace, corpus: Path, embedder: MiniLMEmbedder
) -> None:
    v1 = build_version(workspace, "docs", [str(corpus)], OPTIONS, embedder).version
    version, digest = rebuild(workspace, "docs@v1", embedder)
    assert (version.ref, digest) == ("docs@v1", v1.digest)
    (corpus / "bisect.md").write_text(BISECT + " Edited.", encoding="utf-8")
    with pytest.raises(IntegrityError, match=r"^Rebuilding docs@v1 gives digest .* changed since"):
        rebuild(workspace, "docs@v1", embedder)


def test_rebuild_reads_back_an_hnsw_config(
    workspace: Workspace, corpus: Path, embedder: MiniLMEmbedder
) -> None:
    options = OPTIONS.model_copy(update={"hnsw": True, "hnsw_m": 16, "ef_search": 40})
    v1 = build_version(workspace, "docs", [str(corpus)], options, embedder).version
    assert v1.config["dense"] == {"kind": "hnsw", "m": 16, "ef_search": 40, "ef_construction": 80}
    assert rebuild(workspace, "docs@v1", embedder)[1] == v1.digest


def test_an_empty_corpus_is_one_sentence_and_writes_nothing(
    workspace: Workspace, tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.md").write_text("  \n\n", encoding="utf-8")
    with pytest.raises(InvalidDataError, match=r"^The sources hold no text to index"):
        build_version(workspace, "docs", [str(empty)], OPTIONS, embedder)
    with workspace.store.session() as session:
        assert session.scalar(select(func.count()).select_from(RagIndexRecord)) == 0
        assert session.scalar(select(func.count()).select_from(AuditEvent)) == 0
    assert not list((Path(workspace.settings.artifact_root) / "sha256").glob("*/*"))
    with workspace.store.session() as session, pytest.raises(NotFoundError, match="does not exist"):
        resolve(session, "docs")


@pytest.mark.parametrize("uploads", [True, False], ids=["uploaded", "local"])
def test_uploaded_sources_are_kept_so_a_rebuild_outlives_their_folder(
    workspace: Workspace, tmp_path: Path, embedder: MiniLMEmbedder, uploads: bool
) -> None:
    scratch = tmp_path / "scratch"
    (scratch / "corpus").mkdir(parents=True)
    (scratch / "corpus" / "heapq.md").write_text(HEAPQ, encoding="utf-8")
    (scratch / "bisect.md").write_text(BISECT, encoding="utf-8")
    (tmp_path / "notes.md").write_text("# notes\n\nKept where it lies.", encoding="utf-8")
    specs = [str(scratch / "corpus"), str(scratch / "bisect.md"), str(tmp_path / "notes.md")]
    built = build_version(
        workspace, "docs", specs, OPTIONS, embedder, uploads=scratch if uploads else None
    )
    shutil.rmtree(scratch)  # as the scheduler removes a command job's folder when it ends

    sources = built.version.sources
    if not uploads:
        assert all("kept" not in source for source in sources)
        with pytest.raises(NotFoundError, match="corpus' does not exist"):
            rebuild(workspace, "docs@v1", embedder)
        return
    # only what lay below the uploads was kept; a local path is read where it lies
    assert ["kept" in source for source in sources] == [True, True, False]
    version, digest = rebuild(workspace, "docs@v1", embedder)
    assert (version.ref, digest) == ("docs@v1", built.version.digest)
    # the same documents by the same names: the lineage's digests are those of a plain build
    (scratch / "corpus").mkdir(parents=True)
    (scratch / "corpus" / "heapq.md").write_text(HEAPQ, encoding="utf-8")
    (scratch / "bisect.md").write_text(BISECT, encoding="utf-8")
    plain = build_version(workspace, "plain", specs, OPTIONS, embedder)
    assert plain.version.digest == built.version.digest
    assert [s["digest"] for s in plain.version.sources] == [s["digest"] for s in sources]


def test_a_list_shows_one_projects_indexes_on_each_backend(any_workspace: Workspace) -> None:
    from forgeml.core.errors import AlreadyExistsError
    from forgeml.core.store import RagIndexVersionRecord
    from forgeml.rag.versions import latest_versions

    with any_workspace.store.session() as session:
        for name, project in (("docs-a", "team-a"), ("docs", "default")):
            session.add(RagIndexRecord(id=name, name=name, project=project, created_by="t"))
            session.flush()
            row = {"digest": "d", "artifact": "a", "chunks": 1, "documents": 1}
            session.add(
                RagIndexVersionRecord(
                    id=f"{name}-1",
                    index_id=name,
                    version=1,
                    config={},
                    sources=[],
                    stats={},
                    created_by="t",
                    **row,
                )
            )

    with any_workspace.store.session() as session:
        assert [name for name, _ in latest_versions(session, "team-a")] == ["docs-a"]
        assert [name for name, _ in latest_versions(session, "default")] == ["docs"]
        assert latest_versions(session, "team-b") == []
    with pytest.raises(AlreadyExistsError, match="in the project 'team-a'"):
        build_version(any_workspace.in_project("team-b"), "docs-a", ["nosuch"])


def test_documents_are_named_below_their_folder_so_a_moved_copy_has_the_same_digest(
    workspace: Workspace, corpus: Path, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    moved = shutil.copytree(corpus, tmp_path / "elsewhere" / "deeper" / "corpus")
    here = build_version(workspace, "here", [str(corpus)], OPTIONS, embedder).version
    specs = [str(moved / "heapq.md"), str(moved)]
    there = build_version(workspace, "there", specs, OPTIONS, embedder).version

    again = build_version(workspace, "again", [str(moved)], OPTIONS, embedder).version
    assert here.digest == again.digest
    index = open_index(workspace, "there", embedder)
    sources = sorted({chunk.source for chunk in index.chunks()})
    index.close()
    assert sources == ["corpus/bisect.md", "corpus/heapq.md", "heapq.md"]
    assert [s["spec"] for s in there.sources] == [str(moved / "heapq.md"), str(moved)]


def test_two_folders_of_one_name_with_different_files_are_refused(
    workspace: Workspace, corpus: Path, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    other = tmp_path / "other" / "corpus"
    other.mkdir(parents=True)
    (other / "heapq.md").write_text(HEAPQ + " Edited.", encoding="utf-8")

    with pytest.raises(UsageError, match=r"Two different files are named corpus/heapq\.md"):
        build_version(workspace, "docs", [str(corpus), str(other)], OPTIONS, embedder)
    # the same files twice are read once
    twice = build_version(workspace, "docs", [str(corpus), str(corpus)], OPTIONS, embedder)
    assert twice.version.documents == 2


def test_a_version_recorded_with_full_path_names_still_rebuilds_to_its_digest(
    workspace: Workspace,
    corpus: Path,
    embedder: MiniLMEmbedder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from forgeml.core.store import RagIndexVersionRecord
    from forgeml.rag import sources, versions

    # a version as recorded before documents were named below their folder
    def full_paths(spec: str, workspace: Workspace | None = None, **_: bool) -> Any:
        return sources.load_source(spec, workspace, full_paths=True)

    with monkeypatch.context() as patched:
        patched.setattr(versions, "load_source", full_paths)
        built = build_version(workspace, "old", [str(corpus)], OPTIONS, embedder).version
    with workspace.store.session() as session:
        record = session.get(RagIndexVersionRecord, built.id)
        assert record is not None
        record.sources = [{k: v for k, v in s.items() if k != "names"} for s in record.sources]
        session.commit()
    index = open_index(workspace, "old", embedder)
    assert {chunk.source for chunk in index.chunks()} == {
        str(corpus / "bisect.md"),
        str(corpus / "heapq.md"),
    }
    index.close()

    version, digest = rebuild(workspace, "old@v1", embedder)
    assert digest == version.digest == built.digest
