"""The per-feature statistics of drift: plain functions over counts and samples (scipy).

Counts are of the same bins (or categories) in the same order on both sides. PSI follows
Yurdakul, "Statistical properties of population stability index" (2018): the sum over
bins of (q - p) ln(q / p), each share raised to at least 1e-4 (as Evidently does) so an
empty bin does not make it infinite; every term is >= 0 either way. A pseudo-count would
not do: in a small window it lifts every bin the reference never fills, and PSI with it.
The Jensen-Shannon distance is the square root of the JS divergence in bits (Lin, 1991),
so it lies in [0, 1] and is symmetric.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special, stats

PSI_FLOOR = 1e-4  # the least share a bin counts with in PSI


def _as_counts(counts: Sequence[float] | np.ndarray) -> np.ndarray:
    return np.asarray(counts, dtype=np.float64)


def psi(reference: Sequence[float] | np.ndarray, current: Sequence[float] | np.ndarray) -> float:
    """Population stability index of `current` counts against `reference` counts (>= 0).

    Raises:
        ValueError: a side has no counts at all.
    """
    expected, actual = _as_counts(reference), _as_counts(current)
    if expected.sum() <= 0 or actual.sum() <= 0:
        raise ValueError("PSI needs counts on both sides.")
    p = np.maximum(expected / expected.sum(), PSI_FLOOR)
    q = np.maximum(actual / actual.sum(), PSI_FLOOR)
    return float(np.sum((q - p) * np.log(q / p)))


def js_distance(
    reference: Sequence[float] | np.ndarray, current: Sequence[float] | np.ndarray
) -> float:
    """Jensen-Shannon distance (base 2, in [0, 1]) between two count vectors.

    Raises:
        ValueError: a side has no counts at all.
    """
    p, q = _as_counts(reference), _as_counts(current)
    if p.sum() <= 0 or q.sum() <= 0:
        raise ValueError("Jensen-Shannon distance needs counts on both sides.")
    p, q = p / p.sum(), q / q.sum()
    m = (p + q) / 2
    divergence = (special.rel_entr(p, m).sum() + special.rel_entr(q, m).sum()) / 2
    # rounding can leave it a hair below 0 or above 1
    return math.sqrt(min(1.0, max(0.0, float(divergence) / math.log(2))))


def chi_square(
    reference: Sequence[float] | np.ndarray, current: Sequence[float] | np.ndarray
) -> tuple[float, float]:
    """Chi-square test of homogeneity of two count vectors: (statistic, p-value).

    Categories empty on both sides are left out; with fewer than two left there is
    nothing to compare, and the answer is (0, 1).
    """
    table = np.vstack([_as_counts(reference), _as_counts(current)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2 or (table.sum(axis=1) == 0).any():
        return 0.0, 1.0
    result = stats.chi2_contingency(table, correction=False)
    return float(result.statistic), float(result.pvalue)


def ks(reference: np.ndarray, current: np.ndarray) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov test: (statistic, p-value), asymptotic distribution."""
    result = stats.ks_2samp(reference, current, method="asymp")
    return float(result.statistic), float(result.pvalue)


def wasserstein(reference: np.ndarray, current: np.ndarray, scale: float) -> float:
    """Earth mover's distance between two samples, in units of `scale` (> 0)."""
    return float(stats.wasserstein_distance(reference, current)) / scale


def share_test(
    reference_hits: int, reference_rows: int, current_hits: int, current_rows: int
) -> float:
    """P-value that two shares (hits / rows) are equal: chi-square on the 2x2 table."""
    reference = [reference_hits, reference_rows - reference_hits]
    return chi_square(reference, [current_hits, current_rows - current_hits])[1]
