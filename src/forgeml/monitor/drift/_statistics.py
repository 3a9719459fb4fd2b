"""The per-feature statistics of drift: plain functions over counts and samples (scipy).

Counts are of the same bins (or categories) in the same order on both sides. PSI follows
Yurdakul, "Statistical properties of population stability index" (2018): the sum over
bins of (q - p) ln(q / p), each share raised to at least 1e-4 (as Evidently does) so an
empty bin does not make it infinite; every term is >= 0 either way. A pseudo-count would
not do: in a small window it lifts every bin the reference never fills, and PSI with it.
KS and Wasserstein against a reference kept as quantiles at the mid-points (k + 1/2) / m:
the reference CDF runs through (q_k, (k + 1/2) / m) linearly, jumping only at values the
grid repeats (atoms; a step function of the m points would be off by up to 1 / (2m) and
inflate KS at large n), the current one is the window sample's; Wasserstein is the mid-point rule
for the integral over p of |Q_ref(p) - Q_cur(p)| (the 1-D identity, Villani 2009).
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


def _reference_cdf(quantiles: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference CDF just below and at `points`, from mid-point quantiles.

    A value the grid repeats is an atom: the CDF jumps across it by its share of the grid.
    A value it holds once is a point (q_k, (k + 1/2) / m) of a continuous CDF, and between
    values the CDF runs linearly; below the first it is 0, from the last on 1 (past atoms).
    """
    m = len(quantiles)
    values, first, counts = np.unique(quantiles, return_index=True, return_counts=True)
    atom = counts > 1
    below = np.where(atom, first / m, (first + 0.5) / m)  # CDF just below each value
    at = np.where(atom, (first + counts) / m, (first + 0.5) / m)  # CDF at each value
    # between values[j - 1] and values[j]: from at[j - 1] up to below[j]
    j = np.searchsorted(values, points, side="left")
    exact = (j < len(values)) & (values[np.minimum(j, len(values) - 1)] == points)
    inner = (j > 0) & (j < len(values))
    low, high = np.maximum(j - 1, 0), np.minimum(j, len(values) - 1)
    span = np.where(inner, values[high] - values[low], 1.0)
    share = np.where(inner, (points - values[low]) / np.where(span > 0, span, 1.0), 0.0)
    between = np.where(inner, at[low] + share * (below[high] - at[low]), np.where(j == 0, 0.0, 1.0))
    left = np.where(exact, below[high], between)
    right = np.where(exact, at[high], between)
    return left, right


def ks_against_quantiles(
    quantiles: np.ndarray, reference_count: int, current: np.ndarray
) -> tuple[float, float]:
    """KS of a current sample against a reference sketched by mid-point quantiles.

    The statistic is the largest gap between the two CDFs just below and at every point
    where either steps; the p-value is the two-sample asymptotic one with
    `reference_count` values on the reference side (those the quantiles came from).
    """
    values = np.sort(current)
    points = np.union1d(np.asarray(quantiles), values)
    reference_left, reference_right = _reference_cdf(np.sort(quantiles), points)
    current_left = np.searchsorted(values, points, side="left") / len(values)
    current_right = np.searchsorted(values, points, side="right") / len(values)
    statistic = float(
        max(
            np.abs(reference_left - current_left).max(),
            np.abs(reference_right - current_right).max(),
        )
    )
    effective = reference_count * len(values) / (reference_count + len(values))
    return statistic, float(stats.kstwobign.sf(math.sqrt(effective) * statistic))


def wasserstein_against_quantiles(
    quantiles: np.ndarray, current: np.ndarray, scale: float
) -> float:
    """Wasserstein-1 of a current sample against mid-point quantiles, in units of `scale`."""
    grid = (np.arange(len(quantiles)) + 0.5) / len(quantiles)
    found = np.quantile(current, grid, method="inverted_cdf")
    return float(np.mean(np.abs(np.asarray(quantiles) - found))) / scale


def wasserstein(reference: np.ndarray, current: np.ndarray, scale: float) -> float:
    """Earth mover's distance between two samples, in units of `scale` (> 0)."""
    return float(stats.wasserstein_distance(reference, current)) / scale


def share_test(
    reference_hits: int, reference_rows: int, current_hits: int, current_rows: int
) -> float:
    """P-value that two shares (hits / rows) are equal: chi-square on the 2x2 table."""
    reference = [reference_hits, reference_rows - reference_hits]
    return chi_square(reference, [current_hits, current_rows - current_hits])[1]
