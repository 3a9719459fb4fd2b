"""Ingest of folders: images in one sub-folder per class, and text files.

Files are taken in sorted order of their relative POSIX path, so the same folder always
gives the same rows. Hidden files and folders (name starting with ".") are left out.
The source digest hashes each file's relative path, size and bytes in that order, so that
moving a file to another class folder changes the digest as it changes the labels.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from forgeml.core.errors import InvalidDataError
from forgeml.data._csv import BadRows, Outcome
from forgeml.data._parquet import write_canonical

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp"})
TEXT_SUFFIXES = frozenset({".txt", ".text", ".md"})
# A batch is flushed at whichever comes first: images can be large, texts many.
_BATCH_ROWS = 1024
_BATCH_BYTES = 64 * 1024 * 1024
_IMAGE_SCHEMA = pl.Schema(
    {
        "image": pl.Binary(),
        "label": pl.String(),
        "path": pl.String(),
        "width": pl.Int64(),
        "height": pl.Int64(),
    }
)


def list_files(root: Path) -> list[str]:
    """Relative POSIX paths of the visible files under `root`, sorted."""
    found = []
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if path.is_file() and not any(part.startswith(".") for part in relative.parts):
            found.append(relative.as_posix())
    return sorted(found)


def detect_folder_format(root: Path) -> str:
    """ "images" when the class sub-folders hold image files, "text" when all files are text.

    Raises:
        InvalidDataError: the folder is empty or mixes kinds of files.
    """
    files = _require_files(root)
    suffixes = {f: Path(f).suffix.lower() for f in files}
    in_classes = [f for f in files if "/" in f]
    if any(s in IMAGE_SUFFIXES for s in suffixes.values()) and all(
        suffixes[f] in IMAGE_SUFFIXES for f in in_classes
    ):
        return "images"
    if all(s in TEXT_SUFFIXES for s in suffixes.values()):
        return "text"
    raise InvalidDataError(
        f"The folder '{root}' holds neither only images nor only .txt/.md files, so its "
        "format cannot be told; set format to 'images' or 'text'."
    )


def ingest_images(root: Path, out_path: Path, on_bad_rows: str) -> Outcome:
    """Write one row per image under `root/<class>/...` to `out_path`.

    Columns: `image` (the file's bytes), `label` (the class sub-folder), `path` (relative),
    `width`, `height`. Every image is fully decoded with Pillow to check it; files directly
    in `root` (a README, say) are not rows.

    Args:
        root: the folder, one sub-folder per class.
        out_path: where the canonical Parquet goes.
        on_bad_rows: "fail" or "skip" images Pillow cannot decode.

    Returns:
        Rows written, the source digest, and the bad images (1-based index in sorted order,
        relative path as name).

    Raises:
        InvalidDataError: empty folder, no class sub-folders, no decodable image.
        BadRowsError: undecodable images with `on_bad_rows="fail"`.
    """
    files = [f for f in _require_files(root) if "/" in f]
    if not files:
        raise InvalidDataError(
            f"The folder '{root}' has no class sub-folders; put each image in a sub-folder "
            "named after its label, e.g. cat/1.png."
        )
    digest = hashlib.sha256()
    bad = BadRows()
    batches = _image_batches(root, files, digest, bad)
    rows = write_canonical(batches, out_path, _IMAGE_SCHEMA)
    bad.check(root, on_bad_rows, "images that cannot be decoded")
    if rows == 0:
        raise InvalidDataError(f"The folder '{root}' has no rows: none of its images decode.")
    return Outcome(rows=rows, digest=digest.hexdigest(), bad=bad)


def ingest_texts(root: Path, out_path: Path) -> Outcome:
    """Write one row per text file under `root` to `out_path`.

    Columns: `path` (relative), `text`, and `label` (the top sub-folder, null for files
    directly in `root`) when any file sits in a sub-folder.

    Raises:
        InvalidDataError: empty folder, or a file that is not UTF-8 (named with byte offset).
    """
    files = _require_files(root)
    labelled = any("/" in f for f in files)
    names = ["path", "text", *(["label"] if labelled else [])]
    schema = pl.Schema({name: pl.String() for name in names})
    digest = hashlib.sha256()
    rows = write_canonical(_text_batches(root, files, digest, schema), out_path, schema)
    return Outcome(rows=rows, digest=digest.hexdigest(), bad=BadRows())


def _require_files(root: Path) -> list[str]:
    files = list_files(root)
    if not files:
        raise InvalidDataError(f"The folder '{root}' is empty; add files to it.")
    return files


def _read(root: Path, relative: str, digest: hashlib._Hash) -> bytes:
    data = (root / relative).read_bytes()
    digest.update(relative.encode() + b"\0" + len(data).to_bytes(8, "big"))
    digest.update(data)
    return data


def _image_batches(
    root: Path, files: list[str], digest: hashlib._Hash, bad: BadRows
) -> Iterator[pl.DataFrame]:
    columns: dict[str, list[object]] = {name: [] for name in _IMAGE_SCHEMA.names()}
    size = 0
    for index, relative in enumerate(files, start=1):
        data = _read(root, relative, digest)
        dimensions = _image_size(data)
        if dimensions is None:
            bad.add(index, relative)
            continue
        row = (data, relative.split("/", 1)[0], relative, *dimensions)
        for name, value in zip(_IMAGE_SCHEMA.names(), row, strict=True):
            columns[name].append(value)
        size += len(data)
        if len(columns["path"]) >= _BATCH_ROWS or size >= _BATCH_BYTES:
            yield pl.DataFrame(columns, schema=_IMAGE_SCHEMA)
            columns, size = {name: [] for name in _IMAGE_SCHEMA.names()}, 0
    if columns["path"]:
        yield pl.DataFrame(columns, schema=_IMAGE_SCHEMA)


def _image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) after a full decode, or None when Pillow cannot decode the bytes."""
    from PIL import Image  # only image ingest needs Pillow

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            return image.size
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError):
        return None


def _text_batches(
    root: Path, files: list[str], digest: hashlib._Hash, schema: pl.Schema
) -> Iterator[pl.DataFrame]:
    columns: dict[str, list[str | None]] = {name: [] for name in schema.names()}
    size = 0
    for relative in files:
        data = _read(root, relative, digest)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidDataError(
                f"The file '{relative}' in '{root}' is not valid UTF-8 text (byte offset "
                f"{exc.start}); re-save it as UTF-8."
            ) from None
        columns["path"].append(relative)
        columns["text"].append(text)
        if "label" in columns:
            columns["label"].append(relative.split("/", 1)[0] if "/" in relative else None)
        size += len(data)
        if len(columns["path"]) >= _BATCH_ROWS or size >= _BATCH_BYTES:
            yield pl.DataFrame(columns, schema=schema)
            columns, size = {name: [] for name in schema.names()}, 0
    if columns["path"]:
        yield pl.DataFrame(columns, schema=schema)
