from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from forgeml.core.artifacts import ArtifactStore
from forgeml.core.errors import IntegrityError, NotFoundError


def test_put_is_content_addressed_and_idempotent(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path / "artifacts"))
    digest = store.put_bytes(b"hello")
    assert digest == hashlib.sha256(b"hello").hexdigest()
    assert store.put_bytes(b"hello") == digest
    assert store.get_bytes(digest) == b"hello"
    blobs = [p for p in (tmp_path / "artifacts" / "sha256").rglob("*") if p.is_file()]
    assert len(blobs) == 1


def test_no_temporary_files_are_left_behind(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path / "artifacts"))
    source = tmp_path / "big.bin"
    source.write_bytes(b"x" * 3_000_000)
    store.put_file(source)
    assert list((tmp_path / "artifacts" / "tmp").iterdir()) == []


def test_reads_verify_the_digest(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path / "artifacts"))
    digest = store.put_bytes(b"original")
    blob = tmp_path / "artifacts" / "sha256" / digest[:2] / digest
    blob.write_bytes(b"tampered")
    with pytest.raises(IntegrityError, match="is corrupt"):
        store.get_bytes(digest)
    with pytest.raises(IntegrityError, match="is corrupt"):
        store.local_path(digest)


def test_missing_blob_is_not_found(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path / "artifacts"))
    with pytest.raises(NotFoundError, match="is missing"):
        store.get_bytes("ab" * 32)


def test_works_over_another_fsspec_filesystem() -> None:
    store = ArtifactStore("memory://forgeml-test")
    digest = store.put_bytes(b"in memory")
    assert store.get_bytes(digest) == b"in memory"
    assert store.local_path(digest).read_bytes() == b"in memory"


def test_a_temporary_file_of_the_store_is_moved_into_place(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path / "artifacts"))
    with store.local_tempfile(suffix=".parquet") as temp:
        temp.write_bytes(b"moved")
        digest = store.put_file(temp, move=True)
        assert not temp.exists()
    assert digest == hashlib.sha256(b"moved").hexdigest()
    assert store.get_bytes(digest) == b"moved"
    assert list((tmp_path / "artifacts" / "tmp").iterdir()) == []


@pytest.mark.parametrize("move", [False, True])
def test_other_files_are_copied(tmp_path: Path, move: bool) -> None:
    store = ArtifactStore(str(tmp_path / "artifacts"))
    source = tmp_path / "outside.bin"
    source.write_bytes(b"copied")
    digest = store.put_file(source, move=move)
    assert source.read_bytes() == b"copied"
    assert store.get_bytes(digest) == b"copied"
    with store.local_tempfile() as temp:
        temp.write_bytes(b"copied")
        assert store.put_file(temp, move=move) == digest
        assert temp.exists()  # already stored: nothing to move


def test_remote_stores_copy_even_when_asked_to_move(tmp_path: Path) -> None:
    store = ArtifactStore("memory://forgeml-move-test")
    source = tmp_path / "local.bin"
    source.write_bytes(b"remote")
    digest = store.put_file(source, move=True)
    assert source.exists()
    assert store.get_bytes(digest) == b"remote"
