"""Benchmark of issue 13's batch drift figures: false alarms, power, speed against Evidently.

The data: 100 columns, 80 numeric (normal, log-normal, Poisson counts, uniform, in turn)
and 20 categorical (5 to 35 categories, Zipf-like shares), each column drawn from its own
seeded generator. The reference is built once with `build_reference` from `--rows` rows
(seed 0), written to JSON and read back: every check runs against that cached profile.

- (a) False alarms: `--runs` no-drift windows of `--rows` rows (new seeds); the share of
  column checks flagged (goal <= 1%), beside the share whose p-value alone is below alpha
  (what a p-value-only detector would flag).
- (b) Power: four columns (normal, log-normal, Poisson, categorical) are shifted just
  enough that their population PSI against the reference's bins reaches 0.1 (found by
  bisection on one million values; `--quick`: 200,000); over `--seeds` windows of 5,000
  rows, the share of shifted columns flagged (goal >= 0.9), and the false-alarm share of
  the other 96.
- (c) Batch: a window of `--rows` rows with ten shifted columns: seconds to read the
  cached reference and run `detect_drift` (goal <= 15 s at 1M rows), and, in the same run,
  Evidently's `DataDriftPreset` on the same reference rows and window (a subprocess in
  benchmarks/.venv-evidently; the frames are read before its clock starts) (goal: forgeml
  >= 10x faster). Building the reference is timed apart (a one-off per model version).

- (d) Whole rows on Adult (benchmarks/_adult.py's file, label dropped, rows shuffled with
  seed 0): the reference is built from 20,000 rows (it keeps a 1,000-row sample); windows
  of 1,000 held-out rows, `--seeds` of each kind (`--quick`: 5): unshifted (false alarms),
  "joint" (age shuffled within the window: every column's values unchanged, their relation
  broken) and "older" (age + 5 years, hours + 5). The domain classifier's flag rate beside,
  in the same run, the per-feature detectors' (any column flagged) on the same windows.

Evidently is installed by `--setup` into its own venv (never forgeml's), with torch held
to 2.13.0 by benchmarks/evidently-constraints.txt should anything pull it; without that
venv the peer's column says why.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/drift.py --setup     # Evidently's venv
    PYTHONPATH=src .venv/bin/python benchmarks/drift.py             # 1M rows, 3 runs, 50 seeds
    PYTHONPATH=src .venv/bin/python benchmarks/drift.py --quick     # 50k rows, 1 run, 20 seeds
    PYTHONPATH=src .venv/bin/python benchmarks/drift.py --json      # JSON object last
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from _cli import make_parser, print_json

if TYPE_CHECKING:
    import polars as pl

    from forgeml.monitor.drift import ReferenceProfile

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
EVIDENTLY_VENV = BENCH / ".venv-evidently"
EVIDENTLY_PIN = "evidently==0.7.23"
EVIDENTLY_TIMEOUT_S = 3_600
DEFAULT_ROWS, QUICK_ROWS = 1_000_000, 50_000
POWER_ROWS = 5_000
NUMERIC, CATEGORICAL = 80, 20
NUMERIC_KINDS = ("normal", "lognormal", "poisson", "uniform")
POWER_COLUMNS = ("num_000", "num_001", "num_002", "cat_000")  # one of each shifted kind
BATCH_SHIFTED = 10
TARGET_PSI = 0.1
ADULT_REFERENCE_ROWS, ADULT_WINDOW = 20_000, 1_000
ADULT_NUMBERS = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
GOALS = {"false_alarm_rate": 0.01, "power": 0.9, "batch_s": 15.0, "vs_evidently": 10.0}


def column_names() -> list[str]:
    return [f"num_{i:03d}" for i in range(NUMERIC)] + [f"cat_{i:03d}" for i in range(CATEGORICAL)]


def _zipf(k: int) -> np.ndarray:
    weights = 1 / np.arange(1, k + 1)
    return weights / weights.sum()


def draw_column(name: str, rows: int, seed: int, shift: float = 0.0) -> np.ndarray:
    """One column's values; `shift` (0: none) moves its distribution as its kind allows."""
    index = int(name[4:])
    rng = np.random.default_rng([seed, index, int(name.startswith("cat"))])
    if name.startswith("cat"):
        k = 5 + (index % 4) * 10
        shares = _zipf(k)
        shares = (1 - shift) * shares + shift * shares[::-1]  # mass moves to rare categories
        return rng.choice(np.array([f"c{j}" for j in range(k)]), rows, p=shares)
    kind = NUMERIC_KINDS[index % len(NUMERIC_KINDS)]
    if kind == "normal":
        return rng.normal(shift, 1.0, rows)
    if kind == "lognormal":
        return rng.lognormal(shift, 1.0, rows)
    if kind == "poisson":
        return rng.poisson(3.0 * (1 + shift), rows)
    return rng.uniform(shift, 1.0 + shift, rows)


def make_frame(rows: int, seed: int, shifts: dict[str, float] | None = None) -> pl.DataFrame:
    import polars as pl

    shifts = shifts or {}
    return pl.DataFrame(
        {name: draw_column(name, rows, seed, shifts.get(name, 0.0)) for name in column_names()}
    )


def column_psi(reference: ReferenceProfile, name: str, shift: float, rows: int) -> float:
    """The PSI of `rows` values of `name` shifted by `shift`, against the reference."""
    import polars as pl

    from forgeml.monitor.drift import detect_drift

    frame = pl.DataFrame({name: draw_column(name, rows, seed=99, shift=shift)})
    psi = detect_drift(reference, frame, columns=[name]).columns[0].psi
    assert psi is not None
    return psi


def calibrate(reference: ReferenceProfile, name: str, rows: int) -> tuple[float, float]:
    """The smallest shift (to 0.1%) whose population PSI reaches TARGET_PSI, and that PSI."""
    low, high = 0.0, 1.0
    for _ in range(10):
        middle = (low + high) / 2
        if column_psi(reference, name, middle, rows) >= TARGET_PSI:
            high = middle
        else:
            low = middle
    return high, column_psi(reference, name, high, rows)


def timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


def false_alarms(reference: ReferenceProfile, rows: int, runs: int) -> dict[str, Any]:
    from forgeml.monitor.drift import detect_drift

    flagged = significant = checks = 0
    for run in range(runs):
        report = detect_drift(reference, make_frame(rows, seed=1 + run))
        flagged += len(report.drifted_columns)
        alpha = report.config.alpha
        significant += sum(1 for c in report.columns if (c.p_value or 1.0) < alpha)
        checks += len(report.columns)
    return {
        "rows": rows,
        "runs": runs,
        "checks": checks,
        "flagged": flagged,
        "rate": flagged / checks,
        "p_below_alpha_rate": significant / checks,
    }


def power(reference: ReferenceProfile, seeds: int, population: int) -> dict[str, Any]:
    from forgeml.monitor.drift import detect_drift

    shifts = {name: calibrate(reference, name, population) for name in POWER_COLUMNS}
    hits = dict.fromkeys(POWER_COLUMNS, 0)
    others = other_flags = 0
    for seed in range(seeds):
        window = make_frame(POWER_ROWS, 1_000 + seed, {n: s for n, (s, _) in shifts.items()})
        drifted = set(detect_drift(reference, window).drifted_columns)
        for name in POWER_COLUMNS:
            hits[name] += name in drifted
        other_flags += len(drifted - set(POWER_COLUMNS))
        others += NUMERIC + CATEGORICAL - len(POWER_COLUMNS)
    return {
        "rows": POWER_ROWS,
        "seeds": seeds,
        "columns": {
            name: {"shift": shift, "population_psi": psi, "power": hits[name] / seeds}
            for name, (shift, psi) in shifts.items()
        },
        "power": sum(hits.values()) / (seeds * len(POWER_COLUMNS)),
        "false_alarm_rate": other_flags / others,
    }


def evidently_missing() -> str | None:
    if not (EVIDENTLY_VENV / ".installed").exists():
        return f"{EVIDENTLY_VENV.relative_to(REPO)} is not set up: run drift.py --setup"
    return None


def run_evidently(reference_rows: pl.DataFrame, window: pl.DataFrame) -> dict[str, Any]:
    """Evidently's DataDriftPreset on the same rows, in its own venv; or why it could not."""
    missing = evidently_missing()
    if missing:
        return {"error": missing}
    with tempfile.TemporaryDirectory(prefix="drift-bench-") as folder:
        paths = [Path(folder) / "reference.parquet", Path(folder) / "current.parquet"]
        reference_rows.write_parquet(paths[0])
        window.write_parquet(paths[1])
        done = subprocess.run(
            [EVIDENTLY_VENV / "bin" / "python", BENCH / "_drift_evidently.py", *paths],
            capture_output=True,
            text=True,
            timeout=EVIDENTLY_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-1:])
        return {"error": f"Evidently exited {done.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def batch(rows: int, reference_rows: pl.DataFrame, cached: Path) -> dict[str, Any]:
    from forgeml.monitor.drift import ReferenceProfile, detect_drift

    # every ninth column: each numeric kind and one categorical
    shifted = dict.fromkeys(column_names()[::9][:BATCH_SHIFTED], 0.5)
    window = make_frame(rows, seed=500, shifts=shifted)
    reference, load_s = timed(lambda: ReferenceProfile.from_json(cached.read_bytes()))
    report, detect_s = timed(lambda: detect_drift(reference, window))
    peer = run_evidently(reference_rows, window)
    total = load_s + detect_s
    return {
        "rows": rows,
        "columns": window.width,
        "load_reference_s": load_s,
        "detect_s": detect_s,
        "total_s": total,
        "shifted": sorted(shifted),
        "flagged": report.drifted_columns,
        "evidently": peer,
        "vs_evidently": peer["seconds"] / total if "seconds" in peer else None,
    }


def adult_rows() -> pl.DataFrame:
    """Adult's training file, typed, without the label, in a seeded order."""
    import polars as pl

    from _adult import ADULT

    frame = pl.read_csv(ADULT, infer_schema=False)
    frame = frame.rename({name: name.strip() for name in frame.columns})
    frame = frame.with_columns(pl.all().str.strip_chars().replace("?", None))
    frame = frame.with_columns(pl.col(ADULT_NUMBERS).cast(pl.Int64)).drop("Y")
    return frame.sample(fraction=1.0, shuffle=True, seed=0)


def adult_shifts() -> dict[str, Callable[[pl.DataFrame, int], pl.DataFrame]]:
    import polars as pl

    return {
        "none": lambda window, seed: window,
        "joint": lambda window, seed: window.with_columns(pl.col("age").shuffle(seed=seed)),
        "older": lambda window, seed: window.with_columns(
            pl.col("age") + 5, pl.col("hours-per-week") + 5
        ),
    }


def whole_rows(seeds: int) -> dict[str, Any]:
    """The domain classifier and the per-feature detectors on Adult windows, by shift."""
    from forgeml.monitor.drift import build_reference, detect_drift

    adult = adult_rows()
    reference = build_reference(adult.head(ADULT_REFERENCE_ROWS))
    held_out = adult.slice(ADULT_REFERENCE_ROWS)
    found: dict[str, Any] = {"window": ADULT_WINDOW, "seeds": seeds, "shifts": {}}
    for name, shift in adult_shifts().items():
        classifier = per_feature = 0
        aucs, seconds = [], 0.0
        for seed in range(seeds):
            window = shift(held_out.sample(ADULT_WINDOW, seed=seed), seed)
            report, took = timed(lambda w=window: detect_drift(reference, w, multivariate=True))
            [whole] = report.multivariate
            classifier += whole.drifted
            per_feature += bool(report.drifted_columns)
            aucs.append(whole.statistic)
            seconds += took
        found["shifts"][name] = {
            "domain_classifier_rate": classifier / seeds,
            "per_feature_rate": per_feature / seeds,
            "median_auc": float(np.median(aucs)),
            "seconds_per_window": seconds / seeds,
        }
    return found


def measure(rows: int, runs: int, seeds: int, adult_seeds: int) -> dict[str, Any]:
    from forgeml.monitor.drift import build_reference

    load = os.getloadavg()[0]
    reference_rows = make_frame(rows, seed=0)
    started = time.perf_counter()
    reference = build_reference(reference_rows)
    build_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="drift-reference-") as folder:
        cached = Path(folder) / "reference.json"
        cached.write_text(reference.to_json())
        size = cached.stat().st_size
        batch_result = batch(rows, reference_rows, cached)
    del reference_rows
    found = {
        "rows": rows,
        "cpu_count": os.cpu_count(),
        "load_average_1min": load,
        "build_reference_s": build_s,
        "reference_json_mb": size / 1e6,
        "false_alarms": false_alarms(reference, rows, runs),
        "power": power(reference, seeds, population=min(rows * 4, 1_000_000)),
        "batch": batch_result,
        "whole_rows": whole_rows(adult_seeds),
    }
    figures = {
        "false_alarm_rate": found["false_alarms"]["rate"],
        "power": found["power"]["power"],
        "batch_s": batch_result["total_s"],
        "vs_evidently": batch_result["vs_evidently"],
    }
    met = {
        "false_alarm_rate": figures["false_alarm_rate"] <= GOALS["false_alarm_rate"],
        "power": figures["power"] >= GOALS["power"],
        "batch_s": figures["batch_s"] <= GOALS["batch_s"],
        "vs_evidently": (figures["vs_evidently"] or 0) >= GOALS["vs_evidently"],
    }
    return found | {"figures": figures, "goals": GOALS, "goals_met": met}


def format_table(report: dict[str, Any]) -> str:
    alarms, power_, batch_ = report["false_alarms"], report["power"], report["batch"]
    peer = batch_["evidently"]
    verdict = {True: "met", False: "NOT met"}
    met = report["goals_met"]
    lines = [
        f"forgeml drift: {report['rows']:,} rows x 100 columns; {report['cpu_count']} CPUs, "
        f"load {report['load_average_1min']:.2f} at start",
        f"reference: built in {report['build_reference_s']:.2f} s, "
        f"{report['reference_json_mb']:.1f} MB of JSON",
        f"(a) false alarms, no drift, {alarms['runs']} x {alarms['rows']:,} rows: "
        f"{alarms['flagged']}/{alarms['checks']} = {alarms['rate']:.2%} "
        f"(goal <= 1%: {verdict[met['false_alarm_rate']]}); p < alpha alone: "
        f"{alarms['p_below_alpha_rate']:.1%}",
        f"(b) power at PSI >= {TARGET_PSI}, {power_['seeds']} windows of {power_['rows']:,} rows: "
        f"{power_['power']:.3f} (goal >= 0.9: {verdict[met['power']]}); "
        f"false alarms in the other columns {power_['false_alarm_rate']:.2%}",
    ]
    lines += [
        f"      {name}: shift {c['shift']:.3f}, population PSI {c['population_psi']:.3f}, "
        f"power {c['power']:.2f}"
        for name, c in power_["columns"].items()
    ]
    flagged_ok = sorted(batch_["flagged"]) == batch_["shifted"]
    lines.append(
        f"(c) batch, {batch_['rows']:,} x {batch_['columns']}: read reference "
        f"{batch_['load_reference_s']:.2f} s + detect {batch_['detect_s']:.2f} s = "
        f"{batch_['total_s']:.2f} s (goal <= 15 s: {verdict[met['batch_s']]}); "
        f"flagged the {BATCH_SHIFTED} shifted columns exactly: {'yes' if flagged_ok else 'NO'}"
    )
    if "seconds" in peer:
        lines.append(
            f"    Evidently {peer['version']} DataDriftPreset: {peer['seconds']:.2f} s "
            f"(drifted: {peer['drifted']}); forgeml {batch_['vs_evidently']:.1f}x faster "
            f"(goal >= 10x: {verdict[met['vs_evidently']]})"
        )
    else:
        lines.append(f"    Evidently: not measured: {peer['error']}")
    whole = report["whole_rows"]
    lines.append(
        f"(d) whole rows, Adult windows of {whole['window']:,} rows, {whole['seeds']} per shift: "
        "flagged by the domain classifier | by any per-feature test (same windows)"
    )
    lines += [
        f"      {name:>5}: {f['domain_classifier_rate']:.0%} | {f['per_feature_rate']:.0%} "
        f"(median AUC {f['median_auc']:.3f}, {f['seconds_per_window']:.2f} s per window)"
        for name, f in whole["shifts"].items()
    ]
    return "\n".join(lines)


def setup() -> int:
    """Create benchmarks/.venv-evidently with Evidently (and pyarrow to read Parquet)."""
    python = EVIDENTLY_VENV / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", EVIDENTLY_VENV], check=True)
    constraints = BENCH / "evidently-constraints.txt"
    install = [python, "-m", "pip", "install", "-q", "-c", constraints, EVIDENTLY_PIN, "pyarrow"]
    done = subprocess.run(install, check=False)
    if done.returncode != 0:
        print(f"pip could not install {EVIDENTLY_PIN} (exit {done.returncode})", file=sys.stderr)
        return done.returncode
    (EVIDENTLY_VENV / ".installed").write_text(EVIDENTLY_PIN + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = make_parser(__doc__, "50,000 rows, 1 run, 20 seeds")
    parser.add_argument("--rows", type=int, default=None, help="rows (default 1,000,000)")
    parser.add_argument("--runs", type=int, default=None, help="no-drift runs (default 3)")
    parser.add_argument("--seeds", type=int, default=None, help="power windows (default 50)")
    parser.add_argument("--setup", action="store_true", help="install Evidently's venv")
    args = parser.parse_args(argv)
    if args.setup:
        return setup()
    rows = args.rows or (QUICK_ROWS if args.quick else DEFAULT_ROWS)
    runs = args.runs or (1 if args.quick else 3)
    seeds = args.seeds or (20 if args.quick else 50)
    report = measure(rows, runs, seeds, adult_seeds=5 if args.quick else seeds)
    print(format_table(report))
    print_json(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
