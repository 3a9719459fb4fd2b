"""The two typed option sets of drift detection: how a reference is built, how drift is judged.

At large n every test rejects: a 0.01 standard-deviation shift in a million rows has a
tiny p-value (evidently#50). So a column drifts only when its test's p-value is below
`alpha` AND one effect size passes its threshold; the thresholds are what "a shift worth
acting on" means, the p-value only guards small windows against noise.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ReferenceOptions(BaseModel):
    """How a reference profile summarises a training split."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bins: int = Field(
        default=10,
        ge=2,
        le=100,
        description="Quantile bins per numeric column (fewer where values repeat).",
    )
    sample_size: int = Field(
        default=10_000,
        ge=100,
        le=1_000_000,
        description="Rows kept as a seeded sample of each numeric column (for KS and Wasserstein).",
    )
    top_k: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="Categories counted by name per categorical column; the rest are 'other'.",
    )
    seed: int = Field(default=0, description="Seed of the reference sample.")


class DriftConfig(BaseModel):
    """When a column, and a dataset, counts as drifted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha: float = Field(
        default=0.05, gt=0, lt=1, description="A test's p-value must be below this."
    )
    psi_threshold: float = Field(
        default=0.1, gt=0, description="Population stability index that counts as drift."
    )
    wasserstein_threshold: float = Field(
        default=0.1,
        gt=0,
        description="Wasserstein distance, in reference standard deviations, that counts "
        "as drift (numeric columns).",
    )
    js_threshold: float = Field(
        default=0.1,
        gt=0,
        le=1,
        description="Jensen-Shannon distance (base 2, in [0, 1]) that counts as drift.",
    )
    null_share_threshold: float = Field(
        default=0.05,
        gt=0,
        le=1,
        description="Change in the share of missing values that counts as drift.",
    )
    dataset_drift_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="Share of drifted feature columns at which the dataset counts as drifted.",
    )
    sample_size: int = Field(
        default=10_000,
        ge=100,
        le=1_000_000,
        description="Rows of the current window sampled (seeded) for KS and Wasserstein; "
        "PSI, JS and chi-square count every row.",
    )
    seed: int = Field(default=0, description="Seed of the current window's sample.")
