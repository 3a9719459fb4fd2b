"""Content-addressed blobs (sha256) over fsspec.

Blobs live at `<root>/sha256/<2 hex>/<64 hex>`. Writes are atomic: local files are
written to a temporary name in the store and renamed; object stores get one PUT of the
final key. Reads verify the digest.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from forgeml.core.errors import IntegrityError, InvalidNameError, NotFoundError

_CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}")


def file_digest(path: str | Path) -> str:
    """sha256 of a local file, streamed."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


class ArtifactStore:
    """Immutable blobs addressed by the sha256 of their bytes."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        self.is_local = isinstance(self.fs, LocalFileSystem)
        if self.is_local:
            Path(self.root).mkdir(parents=True, exist_ok=True)

    def _key(self, digest: str) -> str:
        # a digest may come from a request: only 64 hex digits ever become a path
        if not _SHA256.fullmatch(digest):
            raise InvalidNameError(
                f"Invalid artifact digest {digest[:80]!r}: give the 64 hex digits of a sha256."
            )
        return f"{self.root}/sha256/{digest[:2]}/{digest}"

    def exists(self, digest: str) -> bool:
        return bool(self.fs.exists(self._key(digest)))

    def put_file(self, path: str | Path, *, move: bool = False) -> str:
        """Store a local file's bytes; returns their digest. Idempotent.

        Args:
            path: the file.
            move: the caller is done with the file: when it lies in this local store's
                temporary folder (see `local_tempfile`), it is renamed into place instead
                of copied. Otherwise (a remote store, a file elsewhere) it is copied, and
                it is left where it is either way when the blob already exists.
        """
        digest = file_digest(path)
        key = self._key(digest)
        if self.fs.exists(key):
            return digest
        if not self.is_local:
            self.fs.put_file(str(path), key)
            return digest
        Path(key).parent.mkdir(parents=True, exist_ok=True)
        if move and self._in_tmp(Path(path)):
            with open(path, "rb") as source:
                os.fsync(source.fileno())  # durable before it becomes visible, as a copy is
            os.replace(path, key)
            return digest
        with self.local_tempfile(suffix=".part") as temp:
            with open(path, "rb") as source, open(temp, "wb") as target:
                while chunk := source.read(_CHUNK):
                    target.write(chunk)
                target.flush()
                os.fsync(target.fileno())
            os.replace(temp, key)
        return digest

    def put_bytes(self, data: bytes) -> str:
        """Store `data`; returns its digest. Idempotent."""
        with self.local_tempfile() as temp:
            temp.write_bytes(data)
            return self.put_file(temp, move=True)

    def _in_tmp(self, path: Path) -> bool:
        """Whether `path` is a file in this local store's temporary folder (same filesystem)."""
        return path.resolve().parent == (Path(self.root) / "tmp").resolve()

    def get_bytes(self, digest: str) -> bytes:
        """The blob's bytes, verified against `digest`."""
        try:
            data = self.fs.cat_file(self._key(digest))
        except FileNotFoundError:
            raise NotFoundError(f"Artifact {digest[:12]} is missing from {self.url}.") from None
        self._check(digest, hashlib.sha256(data).hexdigest())
        return bytes(data)

    def local_path(self, digest: str, *, verify: bool = True) -> Path:
        """A local path to the blob (downloaded to a cache for remote stores)."""
        if self.is_local:
            path = Path(self._key(digest))
            if not path.exists():
                raise NotFoundError(f"Artifact {digest[:12]} is missing from {self.url}.")
        else:
            path = Path(tempfile.gettempdir()) / "forgeml-cache" / digest
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                with self.local_tempfile(dir_=path.parent) as temp:
                    self.fs.get_file(self._key(digest), str(temp))
                    os.replace(temp, path)
        if verify:
            self._check(digest, file_digest(path))
        return path

    def url_for(self, digest: str) -> str:
        """The fsspec URL of a blob, for readers that open it themselves."""
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        key = self._key(digest)
        return key if self.is_local else f"{protocol}://{key}"

    def _check(self, expected: str, actual: str) -> None:
        if expected != actual:
            raise IntegrityError(
                f"Artifact {expected[:12]} is corrupt: its bytes hash to {actual[:12]}."
            )

    @contextmanager
    def local_tempfile(self, suffix: str = "", dir_: Path | None = None) -> Iterator[Path]:
        """A temporary local path (inside the store when local, so rename is atomic)."""
        if dir_ is None and self.is_local:
            dir_ = Path(self.root) / "tmp"
        if dir_ is not None:
            dir_.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(suffix=suffix, dir=dir_)
        os.close(handle)
        path = Path(name)
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)


def open_artifacts(url: str, **_: Any) -> ArtifactStore:
    """The artifact store at `url` (a local path or any fsspec URL)."""
    return ArtifactStore(url)
