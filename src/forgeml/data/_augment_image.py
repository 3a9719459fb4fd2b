"""Image augmentation as array operations on decoded pixels.

Each source image is decoded once with Pillow into an `(H, W, C)` array; every copy then
goes through the recipe's ops in order: horizontal / vertical flip (each with
`flip_probability`), a random crop of `crop_fraction` of each side resized back to
`(H, W)` by bilinear interpolation, a rotation about the centre by an angle uniform in
`[-max_degrees, max_degrees]` (bilinear, corners outside the source filled with 0), and
gaussian noise of `noise_std` (in [0, 1] intensity units) on the colour channels.
The result is rounded once and written as PNG with fixed settings, so the bytes depend
only on the pixels. Images keep their size, so `width` / `height` columns stay true.

Modes L, LA, RGB and RGBA are kept; any other mode (palette, CMYK, 16-bit ...) is
converted to RGBA when it has transparency and to RGB otherwise. Null images are not
used as sources.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from forgeml.core.errors import InvalidDataError
from forgeml.data._frame import require_columns

if TYPE_CHECKING:
    from forgeml.data.augment import ImageAugmentParams

_KEPT_MODES = ("L", "LA", "RGB", "RGBA")
_PNG_COMPRESS_LEVEL = 6


def augment_images(
    sources: pl.DataFrame,
    row_numbers: np.ndarray,
    params: ImageAugmentParams,
    rng: np.random.Generator,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Make `params.copies` new rows from each source row with an image.

    Args:
        sources: the train rows to copy; every column is kept, the image one rewritten.
        row_numbers: the 0-based position of each source row in the version (for errors).
        params: the image section of the recipe.
        rng: the section's generator.

    Returns:
        The new rows (source order, copies of a row adjacent) and the section's report.

    Raises:
        MissingColumnError: the column is not in the data.
        InvalidDataError: the column is not binary, or a source image cannot be decoded.
    """
    column = params.column
    require_columns(sources, [column], "the image section of the recipe")
    dtype = sources.schema[column]
    if dtype != pl.Binary:
        raise InvalidDataError(
            f"image column '{column}' has type {dtype}, not binary; "
            "name a column of encoded image bytes in the recipe's image section."
        )
    picked: list[int] = []
    encoded: list[bytes] = []
    sizes: list[tuple[int, int]] = []
    for index, blob in enumerate(sources[column].to_list()):
        if blob is None:
            continue
        pixels = _decode(blob, column, int(row_numbers[index]))
        for _ in range(params.copies):
            encoded.append(_encode(transform(pixels, params, rng)))
            picked.append(index)
            sizes.append((pixels.shape[1], pixels.shape[0]))
    rows = sources[picked].with_columns(pl.Series(column, encoded, dtype=pl.Binary))
    rows = _set_sizes(rows, sizes)
    report = {
        "column": column,
        "rows_added": len(encoded),
        "null_sources_skipped": int(sources[column].null_count()),
    }
    return rows, report


def transform(
    pixels: np.ndarray, params: ImageAugmentParams, rng: np.random.Generator
) -> np.ndarray:
    """Apply the recipe's ops in order to an `(H, W, C)` uint8 array; returns a new one."""
    image = pixels.astype(np.float32)
    for op in params.ops:
        if op == "hflip":
            image = image[:, ::-1] if rng.random() < params.flip_probability else image
        elif op == "vflip":
            image = image[::-1] if rng.random() < params.flip_probability else image
        elif op == "crop":
            image = _crop_resized(image, params.crop_fraction, rng)
        elif op == "rotate":
            image = _rotated(image, rng.uniform(-params.max_degrees, params.max_degrees))
        else:
            image = _noisy(image, params.noise_std, rng)
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def _crop_resized(image: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    height, width = image.shape[:2]
    crop_h, crop_w = max(1, round(height * fraction)), max(1, round(width * fraction))
    top = int(rng.integers(0, height - crop_h + 1))
    left = int(rng.integers(0, width - crop_w + 1))
    # pixel centres of the output mapped into the crop (align_corners=False convention)
    ys = top + (np.arange(height) + 0.5) * crop_h / height - 0.5
    xs = left + (np.arange(width) + 0.5) * crop_w / width - 0.5
    ys = np.clip(ys, top, top + crop_h - 1)
    xs = np.clip(xs, left, left + crop_w - 1)
    grid_y, grid_x = np.meshgrid(ys, xs, indexing="ij")
    return _bilinear(image, grid_y, grid_x)


def _rotated(image: np.ndarray, degrees: float) -> np.ndarray:
    height, width = image.shape[:2]
    centre_y, centre_x = (height - 1) / 2, (width - 1) / 2
    grid_y, grid_x = np.meshgrid(
        np.arange(height) - centre_y, np.arange(width) - centre_x, indexing="ij"
    )
    # inverse mapping: each output pixel reads the source point rotated back by the angle
    cos, sin = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
    source_x = cos * grid_x + sin * grid_y + centre_x
    source_y = -sin * grid_x + cos * grid_y + centre_y
    return _bilinear(image, source_y, source_x)


def _bilinear(image: np.ndarray, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Sample `image` at float coordinates; neighbours outside the image count as 0."""
    height, width, channels = image.shape
    flat = image.reshape(height * width, channels)
    y0, x0 = np.floor(ys).astype(np.int64), np.floor(xs).astype(np.int64)
    fy, fx = (ys - y0).ravel(), (xs - x0).ravel()
    y0, x0 = y0.ravel(), x0.ravel()
    out = np.zeros((y0.size, channels), dtype=np.float32)
    for yi, weight_y in ((y0, 1 - fy), (y0 + 1, fy)):
        for xi, weight_x in ((x0, 1 - fx), (x0 + 1, fx)):
            inside = (yi >= 0) & (yi < height) & (xi >= 0) & (xi < width)
            weight = (weight_y * weight_x * inside).astype(np.float32)
            index = np.clip(yi, 0, height - 1) * width + np.clip(xi, 0, width - 1)
            out += flat[index] * weight[:, None]
    return out.reshape((*ys.shape, channels))


def _noisy(image: np.ndarray, std: float, rng: np.random.Generator) -> np.ndarray:
    # an alpha channel (LA, RGBA: an even channel count) stays as it is
    colour = image.shape[2] - (1 if image.shape[2] in (2, 4) else 0)
    noise = rng.normal(0.0, std * 255.0, size=(*image.shape[:2], colour)).astype(np.float32)
    noisy = image.copy()
    noisy[..., :colour] += noise
    return noisy


def _decode(blob: bytes, column: str, row: int) -> np.ndarray:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(blob)) as image:
            image.load()
            mode = image.mode
            if mode not in _KEPT_MODES:
                transparent = "A" in image.getbands() or "transparency" in image.info
                mode = "RGBA" if transparent else "RGB"
            pixels = np.asarray(image.convert(mode))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
        raise InvalidDataError(
            f"image column '{column}' row {row} (0-based) is not an image Pillow can decode; "
            "fix or drop that row."
        ) from None
    return pixels[..., None] if pixels.ndim == 2 else pixels


def _encode(pixels: np.ndarray) -> bytes:
    from PIL import Image

    array = pixels[..., 0] if pixels.shape[2] == 1 else pixels
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(
        buffer, format="PNG", compress_level=_PNG_COMPRESS_LEVEL
    )
    return buffer.getvalue()


def _set_sizes(rows: pl.DataFrame, sizes: list[tuple[int, int]]) -> pl.DataFrame:
    updates = []
    for axis, name in enumerate(("width", "height")):
        if name in rows.columns and rows.schema[name].is_integer():
            values = pl.Series(name, [size[axis] for size in sizes], dtype=pl.Int64)
            updates.append(values.cast(rows.schema[name]))
    return rows.with_columns(updates) if updates else rows
