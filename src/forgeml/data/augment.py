"""Augment the train split of a dataset version with new, derived rows.

`forgeml data augment REF --recipe FILE` reads the recipe into `AugmentParams`. Each
section (text, image, tabular) makes new rows from the train rows of the version; the
output is every input row, unchanged and in order, followed by the new rows, which carry
`__augmented__ = true` and `__split__ = "train"`. Validation and test rows are never used
as sources, so no augmented row can leak them into training.

Every section draws from its own numpy Generator seeded with `(seed, section)`, so the
output is the same bytes for the same input and recipe, and adding one section does not
change the rows another makes.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, model_validator
from pydantic_core import PydanticCustomError

from forgeml.core.errors import InvalidDataError
from forgeml.data._augment_text import load_word_list
from forgeml.data._frame import AUGMENTED_COLUMN, SPLIT_COLUMN, TransformOutput

__all__ = [
    "AugmentParams",
    "ImageAugmentParams",
    "TabularAugmentParams",
    "TextAugmentParams",
    "apply",
    "load_word_list",
]

TextOp = Literal["swap", "delete", "synonym"]
ImageOp = Literal["hflip", "vflip", "crop", "rotate", "noise"]
_TEXT_OPS: tuple[TextOp, ...] = ("swap", "delete", "synonym")
_IMAGE_OPS: tuple[ImageOp, ...] = ("hflip", "crop", "rotate")


class TextAugmentParams(BaseModel):
    """Easy data augmentation for text (Wei & Zou 2019): each copy gets one random op."""

    model_config = ConfigDict(extra="forbid")

    column: str = Field(description="The string column to augment.")
    copies: int = Field(1, ge=1, le=100, description="New rows made from each train row.")
    ops: list[TextOp] = Field(
        default_factory=lambda: list(_TEXT_OPS),
        min_length=1,
        description="Operations to choose from, one per copy: swap two words, delete "
        "words, replace words with synonyms.",
    )
    p: float = Field(
        0.1,
        gt=0.0,
        lt=1.0,
        description="Share of words changed: the deletion probability of each word, and "
        "max(1, round(p * words)) swaps or synonym replacements.",
    )
    synonyms: dict[str, list[str]] | None = Field(
        None,
        description="Synonyms as {word: [synonym, ...]}; null uses the built-in English "
        "list. The CLI inlines a word-list file here so the recipe is self-contained.",
    )


class ImageAugmentParams(BaseModel):
    """Image augmentation: every listed op is applied to each copy, in the order given."""

    model_config = ConfigDict(extra="forbid")

    column: str = Field("image", description="The binary column holding encoded images.")
    copies: int = Field(1, ge=1, le=100, description="New rows made from each train row.")
    ops: list[ImageOp] = Field(
        default_factory=lambda: list(_IMAGE_OPS),
        min_length=1,
        description="Operations applied in order: hflip, vflip, crop (random crop resized "
        "back to the original size), rotate (random angle), noise (gaussian).",
    )
    flip_probability: float = Field(
        0.5, ge=0.0, le=1.0, description="Probability that hflip / vflip flips a copy."
    )
    crop_fraction: float = Field(
        0.9, gt=0.0, le=1.0, description="Side of the random crop as a fraction of the image."
    )
    max_degrees: float = Field(
        15.0, ge=0.0, le=180.0, description="Rotation angle is uniform in [-max, max] degrees."
    )
    noise_std: float = Field(
        0.03, ge=0.0, le=1.0, description="Standard deviation of the noise, in [0, 1] units."
    )


class TabularAugmentParams(BaseModel):
    """SMOTE oversampling (Chawla et al. 2002) of the classes of a label column."""

    model_config = ConfigDict(extra="forbid")

    label: str = Field(description="The class column whose classes are oversampled.")
    strategy: Literal["smote"] = Field("smote", description="Oversampling method.")
    k_neighbors: int = Field(5, ge=1, description="Neighbours (same class) to interpolate to.")
    target: Literal["balance"] | dict[str, NonNegativeInt] = Field(
        "balance",
        description="'balance' brings every class up to the majority count; a mapping "
        "{class: count} brings the classes named up to that count.",
    )


class AugmentParams(BaseModel):
    """The recipe of `forgeml data augment`: a seed and at least one section."""

    model_config = ConfigDict(extra="forbid")

    seed: int = Field(0, description="Seed of the random draws; same seed, same rows.")
    text: TextAugmentParams | None = Field(None, description="Augment a text column.")
    image: ImageAugmentParams | None = Field(None, description="Augment an image column.")
    tabular: TabularAugmentParams | None = Field(None, description="Oversample classes.")

    @model_validator(mode="after")
    def _has_a_section(self) -> AugmentParams:
        if self.text is None and self.image is None and self.tabular is None:
            raise PydanticCustomError(
                "empty_recipe",
                "the recipe has no section; add at least one of text, image or tabular",
            )
        return self


def apply(frame: pl.DataFrame, params: AugmentParams) -> TransformOutput:
    """Append augmented copies of the train rows to `frame`.

    Args:
        frame: a version with a `__split__` column. Rows already marked `__augmented__`
            are kept but not used as sources, so augmenting twice does not compound.
        params: the recipe.

    Returns:
        The original rows (`__augmented__` false unless already true) followed by the new
        rows of each section in the order text, image, tabular; the report counts the rows
        each section added.

    Raises:
        InvalidDataError: the frame has no split or no train rows, or a section cannot use
            its column (see the section helpers).
        MissingColumnError: a section names a column the frame lacks.
    """
    if SPLIT_COLUMN not in frame.columns:
        raise InvalidDataError(
            "augment needs a split version so augmented rows stay in train; "
            "run `forgeml data split` first."
        )
    base = _with_augmented_flag(frame)
    is_source = (pl.col(SPLIT_COLUMN) == "train") & ~pl.col(AUGMENTED_COLUMN)
    row_numbers = base.select(pl.arg_where(is_source)).to_series().to_numpy()
    if len(row_numbers) == 0:
        raise InvalidDataError(
            "the version has no original train rows to augment; split it with a train share."
        )
    sources = base[row_numbers]
    new_parts, report = _run_sections(sources, row_numbers, params)
    new_parts = [_mark_new(part) for part in new_parts if part.height]
    out = pl.concat([base, *new_parts], how="vertical") if new_parts else base
    report = {
        "source_rows": len(row_numbers),
        "rows_added": out.height - base.height,
        **report,
    }
    return TransformOutput(frame=out, report=report)


def _run_sections(
    sources: pl.DataFrame, row_numbers: np.ndarray, params: AugmentParams
) -> tuple[list[pl.DataFrame], dict[str, Any]]:
    # heavy helpers are imported here so `forgeml data list` never loads Pillow
    parts: list[pl.DataFrame] = []
    report: dict[str, Any] = {}
    if params.text is not None:
        from forgeml.data._augment_text import augment_text

        rows, report["text"] = augment_text(sources, params.text, _rng(params.seed, 0))
        parts.append(rows)
    if params.image is not None:
        from forgeml.data._augment_image import augment_images

        rng = _rng(params.seed, 1)
        rows, report["image"] = augment_images(sources, row_numbers, params.image, rng)
        parts.append(rows)
    if params.tabular is not None:
        from forgeml.data._augment_tabular import oversample

        rows, report["tabular"] = oversample(sources, params.tabular, _rng(params.seed, 2))
        parts.append(rows)
    return parts, report


def _rng(seed: int, section: int) -> np.random.Generator:
    return np.random.default_rng([seed, section])


def _with_augmented_flag(frame: pl.DataFrame) -> pl.DataFrame:
    if AUGMENTED_COLUMN in frame.columns:
        return frame.with_columns(pl.col(AUGMENTED_COLUMN).cast(pl.Boolean).fill_null(False))
    return frame.with_columns(pl.lit(False).alias(AUGMENTED_COLUMN))


def _mark_new(rows: pl.DataFrame) -> pl.DataFrame:
    split_type = rows.schema[SPLIT_COLUMN]
    return rows.with_columns(
        pl.lit("train").cast(split_type).alias(SPLIT_COLUMN),
        pl.lit(True).alias(AUGMENTED_COLUMN),
    )
