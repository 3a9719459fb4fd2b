"""Two-sided CUSUM over standardised features: a vectorised update and its calibration.

Page's CUSUM (Page, "Continuous inspection schemes", Biometrika 1954) for each feature and
each direction: S+ = max(0, S+ + z - k), S- = max(0, S- - z - k); the detector alarms when
any statistic passes the threshold h. The recursion is Lindley's, so a batch of B rows is
updated without a Python loop: with C the cumulative sum of the increments and s0 the
statistic before the batch, S_t = C_t - min(-s0, min_{j<=t} C_j).

The threshold comes from a Monte-Carlo calibration of the whole detector (every feature,
both sides) on the reference's own standardised values, so skewed, discrete and clipped
features are calibrated as they are rather than as if they were normal. The run length
for a threshold h is the first time the running maximum of max_i S_i passes h, so one set
of simulated paths answers every h: only the records of that running maximum are kept, and
h is solved for by bisection. Runs still short of h at the horizon are censored; the ARL
estimate is the geometric maximum-likelihood one, sum(min(N, L)) / alarms. A long ARL
would take long to simulate: past a budget, a Markov-chain approximation of each
one-sided CUSUM on the same values extrapolates from the longest ARL simulated (see
`calibrate`; its lattice stays at most _WIDTH deviations a state, since rare large jumps,
such as a feature that is mostly zero, need thresholds of tens of deviations). Siegmund's
approximation (Siegmund, "Sequential Analysis", 1985) for a normal feature is there for
comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_CHUNK_VALUES = 2_000_000  # values simulated per vectorised chunk (~16 MB each array)
_HORIZON = 3  # simulate runs to 3x the target ARL: ~5% are censored
_BUDGET = 20_000_000  # values simulated at most (seconds); beyond, see `calibrate`
_STATES = 128  # lattice states of the Markov-chain approximation, at least
_WIDTH = 0.25  # standardised units per lattice state, at most (up to _MAX_STATES)
_MAX_STATES = 512
_TRANSIENT = 1_000  # rows whose survival the approximation computes exactly


def cusum_paths(increments: np.ndarray, start: np.ndarray) -> np.ndarray:
    """CUSUM statistics after each row: `increments` (B, ...) added to `start` (...).

    S_t = max(0, S_{t-1} + increments_t) for every t, computed in one vectorised pass.
    """
    total = np.cumsum(increments, axis=0)
    floor = np.minimum(np.minimum.accumulate(total, axis=0), -start)
    return total - floor


def siegmund_arl(threshold: float, k: float) -> float:
    """Siegmund's approximate in-control ARL of a one-sided CUSUM on N(0, 1) values."""
    b = threshold + 1.166
    return (math.exp(2 * k * b) - 2 * k * b - 1) / (2 * k * k)


def siegmund_threshold(run_length: float, k: float, sides: int) -> float:
    """The threshold at which `sides` independent one-sided normal CUSUMs alarm, together,
    once per `run_length` rows (by Siegmund's approximation)."""
    low, high = 0.0, 200.0
    for _ in range(60):
        middle = (low + high) / 2
        if siegmund_arl(middle, k) / sides < run_length:
            low = middle
        else:
            high = middle
    return (low + high) / 2


@dataclass(frozen=True)
class Calibration:
    """A calibrated threshold and what the simulation behind it saw."""

    threshold: float
    runs: int
    alarms: int  # runs that alarmed before the horizon (the estimate's precision ~ 1/sqrt)
    horizon: int
    arl: float  # the simulated ARL at `threshold`


def _records(
    pool: np.ndarray, sizes: np.ndarray, k: float, runs: int, horizon: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Simulate `runs` in-control runs; the records of each run's running max statistic.

    Values are drawn (with replacement) from each feature's pooled standardised reference
    values, features independently. Returns replicate, time and value of every record,
    sorted by replicate then time (so values rise within a replicate).
    """
    rng = np.random.default_rng(seed)
    features = sizes.size
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    upper = np.zeros((runs, features), dtype=np.float32)
    lower = np.zeros((runs, features), dtype=np.float32)
    best = np.full(runs, -1.0, dtype=np.float32)
    k32 = np.float32(k)
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    chunk = max(16, _CHUNK_VALUES // (runs * features))
    for begin in range(0, horizon, chunk):
        steps = min(chunk, horizon - begin)
        picks = (rng.random((steps, runs, features), dtype=np.float32) * sizes).astype(np.int32)
        z = pool[picks + offsets]
        up = cusum_paths(z - k32, upper)
        down = cusum_paths(-z - k32, lower)
        upper, lower = up[-1], down[-1]
        statistic = np.maximum(up.max(axis=2), down.max(axis=2))  # (steps, runs)
        running = np.maximum.accumulate(np.vstack([best, statistic]), axis=0)
        step, replicate = np.nonzero(running[1:] > running[:-1])
        found.append((replicate, step + begin, running[1:][step, replicate]))
        best = running[-1]
    replicate = np.concatenate([part[0] for part in found])
    time = np.concatenate([part[1] for part in found])
    value = np.concatenate([part[2] for part in found])
    order = np.lexsort((time, replicate))
    return replicate[order], time[order], value[order]


def _simulated_arl(
    records: tuple[np.ndarray, np.ndarray, np.ndarray], runs: int, horizon: int, h: float
) -> tuple[float, int]:
    """The geometric MLE of the ARL at threshold `h`, and the runs that alarmed."""
    replicate, time, value = records
    ceiling = float(value.max()) + 1.0 if value.size else 1.0
    keys = replicate * ceiling + value
    first = np.searchsorted(keys, np.arange(runs) * ceiling + h, side="right")
    ends = np.searchsorted(replicate, np.arange(runs), side="right")
    alarmed = first < ends
    lengths = np.full(runs, float(horizon))
    lengths[alarmed] = time[first[alarmed]] + 1
    count = int(alarmed.sum())
    return float(lengths.sum()) / max(count, 1), count


def _simulate(
    pool: list[np.ndarray], k: float, run_length: int, runs: int, seed: int
) -> Calibration:
    sizes = np.array([values.size for values in pool], dtype=np.int64)
    horizon = _HORIZON * run_length
    records = _records(np.concatenate(pool).astype(np.float32), sizes, k, runs, horizon, seed)
    low, high = 0.0, float(records[2].max())
    for _ in range(50):
        middle = (low + high) / 2
        if _simulated_arl(records, runs, horizon, middle)[0] < run_length:
            low = middle
        else:
            high = middle
    arl, alarms = _simulated_arl(records, runs, horizon, high)
    return Calibration(threshold=high, runs=runs, alarms=alarms, horizon=horizon, arl=arl)


def _lattice(threshold: float) -> int:
    """Lattice states below `threshold`: _STATES, or more, so that a step stays at most
    _WIDTH standardised units (a coarser lattice rounds the reference value k's pull on
    each row away, and the approximation stops growing with the threshold)."""
    return min(_MAX_STATES, max(_STATES, math.ceil(threshold / _WIDTH)))


def _transitions(increments: np.ndarray, threshold: float, count: int) -> np.ndarray:
    """Brook and Evans's Markov chain (Biometrika 1972) of max(0, S + x) below `threshold`,
    x drawn from `increments`: `count` lattice states, increments rounded to the lattice."""
    width = threshold / count
    jumps = np.rint(increments / width).astype(np.int64)
    low = int(jumps.min())
    pmf = np.bincount(jumps - low) / jumps.size  # pmf[j - low] = P(jump = j)
    states = np.arange(count)
    moves = states[None, :] - states[:, None] - low  # to l from i: jump l - i
    inside = (moves >= 0) & (moves < pmf.size)
    transitions = np.where(inside, pmf[np.clip(moves, 0, pmf.size - 1)], 0.0)
    cumulative = np.concatenate([[0.0], np.cumsum(pmf)])
    transitions[:, 0] = cumulative[np.clip(-states - low + 1, 0, pmf.size)]  # jumps <= -i
    return transitions


def markov_arl(pool: list[np.ndarray], k: float, threshold: float) -> float:
    """The detector's ARL from its 2 x features one-sided CUSUMs' Markov chains, taken as
    independent: P(N > t) is the product of each one's survival from zero, computed
    exactly for _TRANSIENT rows and geometric after (each chain's decay rate by then)."""
    count = _lattice(threshold)
    chains = np.stack(
        [_transitions(sign * values - k, threshold, count) for values in pool for sign in (1, -1)]
    )
    alive = np.ones((*chains.shape[:2], 1))  # alive[c, s]: P(chain c survives t rows | at s)
    total, survival = 0.0, np.ones(len(chains))
    for _ in range(_TRANSIENT):
        total += float(np.prod(survival))
        previous = survival
        alive = np.matmul(chains, alive)  # batched matrix-vector products (BLAS)
        survival = alive[:, 0, 0]
    left = float(np.prod(survival))
    if left == 0.0:
        return total
    rate = float(np.prod(survival / previous))
    # a chain decaying slower than float precision can tell: beyond any ARL that matters
    return total + left / (1.0 - rate) if rate < 1.0 else math.inf


def _markov_threshold(pool: list[np.ndarray], k: float, run_length: float, start: float) -> float:
    """The threshold at which `markov_arl` is `run_length`: the root of log ARL, bracketed
    first, then found by Illinois false-position steps that never leave the bracket (on a
    lattice of _STATES states the approximation is rough far from `start`, and a free
    secant step there can jump to thresholds where it means nothing). The lattice makes
    the approximation a step function of the threshold: the threshold evaluated whose ARL
    came closest to `run_length` is the answer."""
    seen: dict[float, float] = {}

    def gap(threshold: float) -> float:
        seen[threshold] = math.log(markov_arl(pool, k, threshold) / run_length)
        return seen[threshold]

    low, high = start, start
    f_low = f_high = gap(start)
    for _ in range(40):  # widen by 1.5x until the bracket holds the root
        if f_low <= 0 <= f_high:
            break
        if f_high < 0:
            low, f_low = high, f_high
            high *= 1.5
            f_high = gap(high)
        else:
            high, f_high = low, f_low
            low /= 1.5
            f_low = gap(low)
    side = 0
    for _ in range(40):
        if abs(f_high) < 1e-3 or high - low < 1e-4 * high:
            break
        finite = math.isfinite(f_high) and math.isfinite(f_low)
        middle = high - f_high * (high - low) / (f_high - f_low) if finite else (low + high) / 2
        f_middle = gap(middle)
        if f_middle < 0:
            low, f_low = middle, f_middle
            f_high, side = (f_high / 2, -1) if side == -1 else (f_high, -1)
        else:
            high, f_high = middle, f_middle
            f_low, side = (f_low / 2, 1) if side == 1 else (f_low, 1)
    return min(seen, key=lambda threshold: abs(seen[threshold]))


def calibrate(
    pool: list[np.ndarray], k: float, run_length: int, runs: int, seed: int
) -> Calibration:
    """The threshold at which the detector over features drawn from `pool` (one array of
    standardised reference values per feature) alarms once per `run_length` rows.

    Up to a simulation budget the threshold is simulated at `run_length` itself. Beyond,
    it is simulated at the largest ARL the budget allows, and the Markov-chain
    approximation carries it the rest of the way, corrected by the ratio of simulated to
    approximate ARL measured there (what the approximation leaves out: the lattice, and the
    dependence of a feature's two sides).

    Raises:
        ValueError: a feature has no values to draw from.
    """
    if not pool or any(values.size == 0 for values in pool):
        raise ValueError("Calibration needs reference values for every feature.")
    affordable = max(100, _BUDGET // (runs * _HORIZON * len(pool)))
    if run_length <= affordable:
        return _simulate(pool, k, run_length, runs, seed)
    simulated = _simulate(pool, k, affordable, runs, seed)
    correction = simulated.arl / markov_arl(pool, k, simulated.threshold)
    threshold = _markov_threshold(pool, k, run_length / correction, simulated.threshold)
    return Calibration(
        threshold=threshold,
        runs=runs,
        alarms=simulated.alarms,
        horizon=simulated.horizon,
        arl=correction * markov_arl(pool, k, threshold),
    )
