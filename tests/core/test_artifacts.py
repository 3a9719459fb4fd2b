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
