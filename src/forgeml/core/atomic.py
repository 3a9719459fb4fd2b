"""Write a file so that a reader sees all of it or none of it (temp file + rename)."""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` atomically: a reader never sees a partial file.

    The temp file sits beside `path` (same file system, so the rename is atomic) and is
    named by this process's pid, so two writers never share one.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text)
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
