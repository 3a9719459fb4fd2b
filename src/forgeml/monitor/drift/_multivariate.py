"""Multivariate drift: a domain classifier over whole rows, MMD of text embeddings.

Per-feature tests miss a shift in how columns go together (the same ages, the same hours,
but long hours now at young ages). Two detectors look at rows whole:

- The domain classifier (Lipton et al., "Detecting and correcting for label shift", 2018;
  Rabanser et al., "Failing loudly", 2019): a gradient-boosted classifier learns to tell
  the reference's kept rows from the window's; its out-of-fold ROC AUC is 0.5 when the two
  cannot be told apart. The p-value is the Mann-Whitney one of that AUC (an AUC is the U
  statistic over n1 n2, normal under no drift); drift needs p below alpha AND the AUC at
  or past `DriftConfig.domain_auc_threshold` (effect size, as for the features).
- MMD (Gretton et al., "A kernel two-sample test", JMLR 2012) for a text column: the
  unbiased MMD^2 of sentence embeddings with an RBF kernel whose bandwidth is the median
  pairwise distance (the median heuristic), and a permutation p-value.

Both are computed on at most `DriftConfig.multivariate_rows` rows of each side.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats

from forgeml.monitor.drift._config import DriftConfig

if TYPE_CHECKING:
    from forgeml.monitor.drift._reference import ReferenceProfile

Embed = Callable[[list[str]], np.ndarray]
_FOLDS = 5
_CATEGORIES = 250  # HistGradientBoosting takes fewer category codes than its 255 bins
_RARE = 5  # categories seen fewer times than this (both sides together) count as missing


class MultivariateDrift(BaseModel):
    """A multivariate detector's verdict on a window."""

    model_config = ConfigDict(extra="forbid")

    detector: str = Field(description="domain_classifier, or mmd:<text column>.")
    columns: list[str]
    reference_rows: int
    current_rows: int
    statistic: float | None = Field(description="ROC AUC (domain classifier) or MMD^2.")
    p_value: float | None
    threshold: float
    drifted: bool
    note: str | None = None


def _side(rows: pl.DataFrame, limit: int, seed: int) -> pl.DataFrame:
    return rows.sample(n=limit, seed=seed) if rows.height > limit else rows


def _encoded(reference: pl.DataFrame, current: pl.DataFrame) -> tuple[np.ndarray, list[bool]]:
    """Both sides as one float matrix; categories as codes shared by the two sides."""
    both = pl.concat([reference, current], how="vertical_relaxed")
    columns, categorical = [], []
    for name, dtype in both.schema.items():
        if dtype.is_numeric():
            columns.append(both.get_column(name).cast(pl.Float64).fill_nan(None).to_numpy())
            categorical.append(False)
        else:
            # a category seen a few times is an identifier, not a population: one "rare" code
            text = pl.col(name).cast(pl.String)
            common = pl.when(text.count().over(text) >= _RARE).then(text)
            # codes 0..k-1 as the classifier needs, at most _CATEGORIES of them (the rest missing)
            code = common.rank("dense") - 1
            codes = both.select(pl.when(code < _CATEGORIES).then(code).cast(pl.Float64))
            columns.append(codes.to_series().to_numpy())
            categorical.append(True)
    return np.column_stack(columns).astype(np.float64), categorical


def auc_p_value(auc: float, positives: int, negatives: int) -> float:
    """One-sided p-value of an AUC this high under no difference (Mann-Whitney, normal)."""
    sd = math.sqrt((positives + negatives + 1) / (12 * positives * negatives))
    return float(stats.norm.sf((auc - 0.5) / sd))


def domain_classifier(
    reference: ReferenceProfile, current: pl.DataFrame, config: DriftConfig | None = None
) -> MultivariateDrift:
    """Whether a classifier can tell the window's rows from the reference's kept rows.

    Uses the reference's `row_sample` and the window's rows over the feature columns both
    have (text columns left out: MMD judges those), each side at most
    `config.multivariate_rows` rows (seeded).
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from threadpoolctl import threadpool_limits

    config = config or DriftConfig()
    kept = pl.DataFrame(reference.row_sample, strict=False)
    names = [
        name
        for name in reference.features
        if name in kept.columns and name in current.columns and name not in reference.text_columns
    ]
    base: dict[str, Any] = {
        "detector": "domain_classifier",
        "columns": names,
        "threshold": config.domain_auc_threshold,
    }
    limit = config.multivariate_rows
    old = _side(kept.select(names), limit, config.seed) if names else kept.clear()
    new = _side(current.select(names), limit, config.seed) if names else current.clear()
    base |= {"reference_rows": old.height, "current_rows": new.height}
    if not names or old.height < _FOLDS * 2 or new.height < _FOLDS * 2:
        note = "too few kept reference rows or window rows (or no shared column) to classify"
        return MultivariateDrift(statistic=None, p_value=None, drifted=False, note=note, **base)
    features, categorical = _encoded(old, new.cast(old.schema, strict=False))
    labels = np.r_[np.zeros(old.height), np.ones(new.height)]
    # small and shallow: a few thousand rows, and an overfit classifier scores noise
    model = HistGradientBoostingClassifier(
        max_iter=60,
        learning_rate=0.05,
        max_leaf_nodes=8,
        min_samples_leaf=40,
        categorical_features=np.array(categorical),
        random_state=config.seed,
    )
    folds = StratifiedKFold(_FOLDS, shuffle=True, random_state=config.seed)
    # a few thousand rows: OpenMP's threads cost more than they give, most on a busy host
    with threadpool_limits(limits=1):
        predicted = cross_val_predict(model, features, labels, cv=folds, method="predict_proba")
    scores = predicted[:, 1]
    auc = float(roc_auc_score(labels, scores))
    p_value = auc_p_value(auc, new.height, old.height)
    drifted = p_value < config.alpha and auc >= config.domain_auc_threshold
    return MultivariateDrift(statistic=auc, p_value=p_value, drifted=drifted, **base)


def _rbf_kernel(points: np.ndarray) -> np.ndarray:
    squared = np.sum(points**2, axis=1)
    distances = np.maximum(squared[:, None] + squared[None, :] - 2 * points @ points.T, 0.0)
    off_diagonal = distances[np.triu_indices(len(points), k=1)]
    bandwidth = float(np.median(off_diagonal)) or 1.0  # median heuristic (of squared distances)
    return np.exp(-distances / bandwidth)


def _mmd2(kernel: np.ndarray, first: np.ndarray) -> float:
    """Unbiased MMD^2 from the pooled kernel; `first` marks the first sample's rows."""
    second = ~first
    m, n = int(first.sum()), int(second.sum())
    within_x = kernel[np.ix_(first, first)]
    within_y = kernel[np.ix_(second, second)]
    term_x = (within_x.sum() - np.trace(within_x)) / (m * (m - 1))
    term_y = (within_y.sum() - np.trace(within_y)) / (n * (n - 1))
    return float(term_x + term_y - 2 * kernel[np.ix_(first, second)].mean())


def mmd_test(
    reference: np.ndarray, current: np.ndarray, permutations: int, rng: np.random.Generator
) -> tuple[float, float]:
    """(unbiased MMD^2, permutation p-value) of two embedding matrices, RBF kernel."""
    kernel = _rbf_kernel(np.vstack([reference, current]))
    first = np.r_[np.ones(len(reference), bool), np.zeros(len(current), bool)]
    observed = _mmd2(kernel, first)
    exceed = sum(_mmd2(kernel, rng.permutation(first)) >= observed for _ in range(permutations))
    return observed, (1 + exceed) / (1 + permutations)


def text_mmd(
    reference: ReferenceProfile,
    current: pl.DataFrame,
    column: str,
    embed: Embed,
    config: DriftConfig | None = None,
) -> MultivariateDrift:
    """MMD of `embed`-ded texts of `column`: the reference's kept rows against the window."""
    config = config or DriftConfig()
    limit = config.multivariate_rows
    rng = np.random.default_rng(config.seed)
    old = [text for text in reference.row_sample.get(column, []) if isinstance(text, str)]
    new = current.get_column(column).drop_nulls().cast(pl.String).to_list()
    old = [old[i] for i in sorted(rng.permutation(len(old))[:limit])]
    new = [new[i] for i in sorted(rng.permutation(len(new))[:limit])]
    base: dict[str, Any] = {
        "detector": f"mmd:{column}",
        "columns": [column],
        "reference_rows": len(old),
        "current_rows": len(new),
        "threshold": config.mmd_threshold,
    }
    if len(old) < 2 or len(new) < 2:
        note = "too few texts on a side to compare"
        return MultivariateDrift(statistic=None, p_value=None, drifted=False, note=note, **base)
    statistic, p_value = mmd_test(embed(old), embed(new), config.mmd_permutations, rng)
    drifted = p_value < config.alpha and statistic >= config.mmd_threshold
    return MultivariateDrift(statistic=statistic, p_value=p_value, drifted=drifted, **base)
