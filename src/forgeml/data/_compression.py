"""Compressed sources: a `.gz`, `.bz2` or `.zst` file is read as the bytes it holds.

Decompression streams (Arrow's codecs, a block at a time), so a compressed file costs no
more memory than the plain one and no temporary copy on disk. Readers open every source
through `open_source`; the digest they compute is that of the decompressed bytes, so
`adult.data` and `adult.data.gz` are the same source.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

from forgeml.core.errors import InvalidDataError

# suffix -> Arrow codec name (`pyarrow.Codec`)
CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd"}


def is_compressed(path: Path) -> bool:
    """Whether `path` names a compressed file (by its last suffix)."""
    return path.suffix.lower() in CODECS


def inner_suffix(path: Path) -> str:
    """The suffix that tells the format: `.csv` for both `a.csv` and `a.csv.gz`."""
    return Path(path.stem).suffix.lower() if is_compressed(path) else path.suffix.lower()


def open_source(path: Path) -> BinaryIO:
    """`path` opened for reading its (decompressed) bytes; the caller closes it.

    Raises:
        OSError: the file cannot be opened.
    """
    if not is_compressed(path):
        return path.open("rb")
    return io.BufferedReader(_Decompressing(path), buffer_size=1024 * 1024)


class _Decompressing(io.RawIOBase):
    """The decompressed bytes of one file; a corrupt or truncated one is one sentence."""

    def __init__(self, path: Path) -> None:
        import pyarrow as pa

        self.path = path
        self.codec = CODECS[path.suffix.lower()]
        self._stream = pa.input_stream(str(path), compression=self.codec)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        try:
            data = self._stream.read(len(buffer))
        except OSError as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreadable"
            raise InvalidDataError(
                f"'{self.path}' is not a complete {self.codec} file ({detail}); "
                "check the file or compress it again."
            ) from None
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._stream.close()
        super().close()
