"""The two typed option sets of drift detection: how a reference is built, how drift is judged.

At large n every test rejects: a 0.01 standard-deviation shift in a million rows has a
tiny p-value (evidently#50). So a column drifts only when its test's p-value is below
`alpha` AND one effect size passes its threshold; the thresholds are what "a shift worth
acting on" means, the p-value only guards small windows against noise.
"""

from __future__ import annotations

from pydantic import Field, PositiveFloat

from forgeml.monitor.drift._options import Options, Share


class ReferenceOptions(Options):
    """How a reference profile summarises a training split."""

    bins: int = Field(
        default=10,
        ge=2,
        le=100,
        description="Quantile bins per numeric column (fewer where values repeat).",
    )
    sample_size: int = Field(
        default=100_000,
        ge=100,
        le=10_000_000,
        description="Rows read (a seeded sample) to find each numeric column's quantiles; "
        "none of them is kept.",
    )
    quantiles: int = Field(
        default=256,
        ge=16,
        le=4_096,
        description="Quantiles kept per numeric column (for KS and Wasserstein).",
    )
    row_sample_size: int = Field(
        default=1_000,
        ge=0,
        le=100_000,
        description="Whole rows kept (a seeded sample) for the multivariate detectors: the "
        "domain classifier and, over text columns, MMD of embeddings.",
    )
    top_k: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="Categories counted by name per categorical column; the rest are 'other'.",
    )
    seed: int = Field(default=0, description="Seed of the reference samples.")


class DriftConfig(Options):
    """When a column, and a dataset, counts as drifted."""

    alpha: float = Field(
        default=0.05, gt=0, lt=1, description="A test's p-value must be below this."
    )
    psi_threshold: PositiveFloat = Field(
        default=0.1, description="Population stability index that counts as drift."
    )
    wasserstein_threshold: PositiveFloat = Field(
        default=0.1,
        description="Wasserstein distance, in reference standard deviations, that counts "
        "as drift (numeric columns).",
    )
    js_threshold: Share = Field(
        default=0.1,
        description="Jensen-Shannon distance (base 2, in [0, 1]) that counts as drift.",
    )
    null_share_threshold: Share = Field(
        default=0.05,
        description="Change in the share of missing values that counts as drift.",
    )
    dataset_drift_share: Share = Field(
        default=0.5,
        description="Share of drifted feature columns at which the dataset counts as drifted.",
    )
    sample_size: int = Field(
        default=10_000,
        ge=100,
        le=1_000_000,
        description="Rows of the current window sampled (seeded) for KS and Wasserstein; "
        "PSI, JS and chi-square count every row.",
    )
    domain_auc_threshold: float = Field(
        default=0.55,
        gt=0.5,
        le=1,
        description="Out-of-fold ROC AUC of the domain classifier (reference rows vs window "
        "rows) that counts as multivariate drift.",
    )
    # two halves of 200 positive SST-2 reviews (MiniLM) read up to 0.0025 by chance; the
    # same 100 against 100 negative ones 0.0125 (tests/monitor/drift/test_multivariate.py)
    mmd_threshold: PositiveFloat = Field(
        default=0.005,
        description="Unbiased MMD^2 of text embeddings (RBF kernel, median heuristic) that "
        "counts as drift of a text column.",
    )
    mmd_permutations: int = Field(
        default=200, ge=19, le=10_000, description="Permutations behind MMD's p-value."
    )
    multivariate_rows: int = Field(
        default=1_000,
        ge=10,
        le=100_000,
        description="Rows of each side (seeded sample) the multivariate detectors use.",
    )
    seed: int = Field(default=0, description="Seed of the current window's sample.")
