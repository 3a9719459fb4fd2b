"""Benchmark of issue 13's online drift figures: the ARL as set, and the delay to a shift.

The data: 10 numeric features (6 normal, 2 log-normal, 2 Poisson counts), each from its own
seeded generator. The detector is fitted once on a 50,000-row reference (seed 0) with
`OnlineDriftConfig(run_length=ARL)`; every run starts from its saved JSON state.

- (a) Run length: `--runs` no-drift streams from the same population; each is fed (2,000
  rows at a time) until the first alarm. The mean of those run lengths is the measured ARL
  (goal: within +-20% of the one set, 10,000; `--quick`: 1,000). Beside it, in the same
  run, the textbook threshold that ignores the 20 statistics (Siegmund's approximation
  for one normal CUSUM at the ARL set), to show what the calibration is for.
- (b) Delay: ARL set to 10,000 (`--quick`: 2,000); each seed's stream is 1,000 in-control
  rows, then normal feature 0 moves by 0.5 deviation. The delay is the first alarm at or
  after the shift, minus the shift's row (a seed alarming before it is counted apart);
  median over `--seeds` seeds (goal <= 150). Peers in the same run, on the shifted feature
  ALONE (a head start forgeml's detector does not get): river's ADWIN and KSWIN (defaults),
  each with its own ARL measured on a no-drift stream of that feature.

    PYTHONPATH=src .venv/bin/python benchmarks/drift_online.py [--quick] [--json]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from _cli import make_parser, print_json

FEATURES = 10
REFERENCE_ROWS = 50_000
SHIFT_ROW = 1_000
SHIFT = 0.5
BATCH = 2_000


def _draw(rows: int, seed: int) -> np.ndarray:
    """Rows of the population: features 0-5 normal, 6-7 log-normal, 8-9 Poisson(3)."""
    rng = np.random.default_rng(seed)
    columns = [rng.normal(0.0, 1.0, rows) for _ in range(6)]
    columns += [rng.lognormal(0.0, 0.5, rows) for _ in range(2)]
    columns += [rng.poisson(3, rows).astype(float) for _ in range(2)]
    return np.column_stack(columns)


def _fit(run_length: int) -> tuple[Any, float]:
    from forgeml.monitor.drift import OnlineDriftConfig, OnlineDriftDetector

    reference = _draw(REFERENCE_ROWS, seed=0)
    columns = {f"f{i}": reference[:, i] for i in range(FEATURES)}
    started = time.perf_counter()
    detector = OnlineDriftDetector.fit(columns, OnlineDriftConfig(run_length=run_length))
    return detector, time.perf_counter() - started


def _run_length(saved: str, seed: int, threshold: float | None = None) -> int:
    from forgeml.monitor.drift import OnlineDriftDetector

    detector = OnlineDriftDetector.from_json(saved)
    if threshold is not None:
        detector.state.threshold = threshold
    for part in range(10_000):
        alarms = detector.update(_draw(BATCH, seed=1_000_000 * (seed + 1) + part))
        if alarms:
            return alarms[0].row + 1
    raise RuntimeError("no alarm in 20M rows")


def measure_arl(run_length: int, runs: int) -> dict[str, Any]:
    from forgeml.monitor.drift._cusum import siegmund_threshold

    detector, seconds = _fit(run_length)
    saved = detector.to_json()
    started = time.perf_counter()
    lengths = [_run_length(saved, seed) for seed in range(runs)]
    naive = siegmund_threshold(run_length, detector.state.config.shift / 2, sides=1)
    naive_lengths = [_run_length(saved, seed, naive) for seed in range(runs)]
    mean = statistics.fmean(lengths)
    return {
        "run_length_set": run_length,
        "runs": runs,
        "threshold": detector.threshold,
        "calibrated_arl": detector.state.calibrated_arl,
        "calibration_s": seconds,
        "measured_arl": mean,
        "standard_error": statistics.stdev(lengths) / len(lengths) ** 0.5,
        "ratio": mean / run_length,
        "within_20pct": abs(mean / run_length - 1) <= 0.2,
        "naive_threshold": naive,
        "naive_measured_arl": statistics.fmean(naive_lengths),
        "replay_s": time.perf_counter() - started,
    }


def _shifted(seed: int, rows: int) -> np.ndarray:
    values = _draw(rows, seed=7_000_000 + seed)
    values[SHIFT_ROW:, 0] += SHIFT
    return values


def _forgeml_delay(saved: str, seed: int) -> tuple[int | None, bool]:
    """(delay, alarmed before the shift) for one seed."""
    from forgeml.monitor.drift import OnlineDriftDetector

    detector = OnlineDriftDetector.from_json(saved)
    alarms = detector.update(_shifted(seed, SHIFT_ROW + 5_000))
    early = any(alarm.row < SHIFT_ROW for alarm in alarms)
    later = [alarm.row for alarm in alarms if alarm.row >= SHIFT_ROW]
    return (later[0] - SHIFT_ROW + 1 if later else None), early


def _river(name: str, seed: int) -> Any:
    from river import drift

    return drift.ADWIN() if name == "ADWIN" else drift.KSWIN(seed=seed)


def _peer_alarms(make: Callable[[], Any], values: np.ndarray, until: int) -> list[int]:
    """The peer's alarms over `values`, stopping at the first one from row `until` on."""
    detector, found = make(), []
    for index, value in enumerate(values.tolist()):
        detector.update(value)
        if detector.drift_detected:
            found.append(index)
            if index >= until:
                break
    return found


def _summary(delays: list[int | None], early: int, seeds: int) -> dict[str, Any]:
    caught = [delay for delay in delays if delay is not None]
    return {
        "median_delay": statistics.median(caught) if caught else None,
        "mean_delay": statistics.fmean(caught) if caught else None,
        "detected": len(caught),
        "alarmed_before_shift": early,
        "seeds": seeds,
    }


def measure_delay(run_length: int, seeds: int, peer_rows: int) -> dict[str, Any]:
    detector, _ = _fit(run_length)
    saved = detector.to_json()
    results = [_forgeml_delay(saved, seed) for seed in range(seeds)]
    figures: dict[str, Any] = {
        "run_length_set": run_length,
        "shift_sd": SHIFT,
        "forgeml": _summary([d for d, _ in results], sum(e for _, e in results), seeds),
    }
    for name in ("ADWIN", "KSWIN"):
        quiet = _draw(peer_rows, seed=99)[:, 0]
        alarms = _peer_alarms(lambda name=name: _river(name, 0), quiet, peer_rows)
        delays, early = [], 0
        for seed in range(seeds):
            values = _shifted(seed, SHIFT_ROW + 5_000)[:, 0]
            found = _peer_alarms(lambda name=name, seed=seed: _river(name, seed), values, SHIFT_ROW)
            early += any(index < SHIFT_ROW for index in found)
            later = [index for index in found if index >= SHIFT_ROW]
            delays.append(later[0] - SHIFT_ROW + 1 if later else None)
        figures[f"river_{name}"] = {
            **_summary(delays, early, seeds),
            "no_drift_rows": peer_rows,
            "no_drift_alarms": len(alarms),
            "measured_arl": peer_rows / len(alarms) if alarms else None,
        }
    return figures


def report(figures: dict[str, Any]) -> None:
    arl = figures["arl"]
    print(
        f"(a) run length, {arl['runs']} no-drift runs, 10 features (load "
        f"{figures['load_average_1min']:.1f})\n"
        f"  set {arl['run_length_set']}: measured {arl['measured_arl']:.0f} "
        f"+- {arl['standard_error']:.0f} ({arl['ratio']:.2f}x; goal 0.8-1.2x: "
        f"{'met' if arl['within_20pct'] else 'NOT met'}); calibration "
        f"{arl['calibration_s']:.1f} s, threshold {arl['threshold']:.2f}\n"
        f"  textbook threshold {arl['naive_threshold']:.2f} (ignores the 20 statistics): "
        f"measured {arl['naive_measured_arl']:.0f}"
    )
    delay = figures["delay"]
    print(
        f"(b) delay to a {delay['shift_sd']} sd shift in 1 of 10 features, ARL set "
        f"{delay['run_length_set']}"
    )
    print(f"  {'detector':<28} {'median':>7} {'mean':>7} {'caught':>7} {'early':>6} {'ARL':>9}")
    for name, found in delay.items():
        if not isinstance(found, dict):
            continue
        label = "forgeml (all 10 features)" if name == "forgeml" else f"{name} (feature 0 only)"
        peer_arl = found.get("measured_arl")
        shown_arl = f"{peer_arl:.0f}" if peer_arl else ("set" if name == "forgeml" else "none")
        median = found["median_delay"]
        mean = found["mean_delay"]
        print(
            f"  {label:<28} {median if median is not None else '-':>7} "
            f"{f'{mean:.0f}' if mean is not None else '-':>7} "
            f"{found['detected']:>3}/{found['seeds']:<3} {found['alarmed_before_shift']:>6} "
            f"{shown_arl:>9}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__, "ARL 1,000 / 2,000, fewer runs")
    parser.add_argument("--runs", type=int, default=None, help="no-drift runs (default 200)")
    parser.add_argument("--seeds", type=int, default=None, help="shift seeds (default 200)")
    args = parser.parse_args(argv)
    runs = args.runs or (40 if args.quick else 200)
    seeds = args.seeds or (20 if args.quick else 200)
    figures: dict[str, Any] = {"quick": args.quick, "load_average_1min": os.getloadavg()[0]}
    figures["arl"] = measure_arl(1_000 if args.quick else 10_000, runs)
    figures["delay"] = measure_delay(
        2_000 if args.quick else 10_000, seeds, 5_000 if args.quick else 100_000
    )
    report(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
