"""What a drift check found: per column, and for the dataset as a whole."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from forgeml.monitor.drift._config import DriftConfig
from forgeml.monitor.drift._multivariate import MultivariateDrift

TestName = Literal["ks", "chi2", "none"]
EffectName = Literal["psi", "wasserstein", "js"]


class MissingShareCheck(BaseModel):
    """Whether the share of missing values (null, NaN, infinite) moved."""

    model_config = ConfigDict(extra="forbid")

    reference: float
    current: float
    p_value: float
    drifted: bool


class ColumnDrift(BaseModel):
    """One column's verdict, with every figure behind it."""

    model_config = ConfigDict(extra="forbid")

    column: str
    kind: Literal["numeric", "categorical"]
    test: TestName = Field(description="ks (numeric), chi2 (categorical), none (no values).")
    statistic: float | None
    p_value: float | None
    effect: EffectName | None = Field(
        description="The effect size closest to (or furthest past) its threshold."
    )
    effect_size: float | None
    psi: float | None
    js_distance: float | None
    wasserstein: float | None = Field(description="In reference standard deviations.")
    unseen_share: float | None = Field(
        default=None,
        description="Categorical: share of current values in categories the reference never "
        "saw (None when the reference lumped its rarest categories into 'other').",
    )
    values: int = Field(description="Current values compared (missing ones left out).")
    missing: MissingShareCheck
    drifted: bool
    note: str | None = None


class DriftReport(BaseModel):
    """A drift check of a current window (or dataset) against a reference profile."""

    model_config = ConfigDict(extra="forbid")

    reference_rows: int
    current_rows: int
    config: DriftConfig
    columns: list[ColumnDrift]
    prediction: ColumnDrift | None = None
    drifted_columns: list[str]
    drifted_share: float = Field(description="Share of feature columns that drifted.")
    drifted: bool = Field(description="drifted_share reached config.dataset_drift_share.")
    multivariate: list[MultivariateDrift] = Field(
        default_factory=list,
        description="Whole-row detectors: the domain classifier, MMD per text column.",
    )
    predictions: list[ColumnDrift] = Field(
        default_factory=list,
        description="The model's outputs (label, confidence or prediction) against its "
        "outputs on the validation split.",
    )
    predictions_drifted: bool = Field(default=False, description="An output column drifted.")
