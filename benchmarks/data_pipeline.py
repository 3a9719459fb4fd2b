"""Benchmark of issue 2: forgeml's data pipeline against the same work done in plain pandas.

What is measured: a deterministic mixed-type CSV (ints, floats, categories, free text, dates
as text, a `label` column, ~2% of fields written as `?`, ~1% exact duplicate rows, a few
outliers; 1,000,000 rows is ~150 MB) goes through three stages on each side:

- forgeml: `pipeline.add` (ingest to a Parquet version) -> `derive("clean")` (`?` to null,
  exact duplicates dropped, IQR outliers of `income` dropped, median / mode imputation)
  -> `derive("split")` (0.8/0.1/0.1 stratified on `label`, seed 0), in a fresh FORGEML_HOME.
  Every stage records a version: canonical Parquet, digest, quality profile, SQLite row.
- pandas: `read_csv(na_values=["?"])`, `drop_duplicates`, the IQR filter, `fillna` with
  median / mode, `groupby(label).sample(...)` for the split; each stage writes its output
  with `to_parquet`, as forgeml persists each of its versions.

Each side runs in its own subprocess (`--worker forgeml|pandas`), so its peak RSS (the
process's `ru_maxrss`) is its own; sides alternate over the runs and medians are reported.
Stage times exclude interpreter start-up, imports and creating the empty workspace; the CSV
is generated once, cached under the temp dir by (rows, seed), and never timed.

Figures: seconds per stage and in total, rows/s (input rows / total seconds), peak RSS MB,
and the ratios forgeml/pandas of throughput (target >= 5) and of peak memory (target < 1).

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/data_pipeline.py            # 1M rows, 3 runs
    PYTHONPATH=src .venv/bin/python benchmarks/data_pipeline.py --quick    # 100k rows, 1 run
    PYTHONPATH=src .venv/bin/python benchmarks/data_pipeline.py --json     # JSON last line
    PYTHONPATH=src .venv/bin/python benchmarks/data_pipeline.py --worker forgeml --profile

`--profile` (with `--worker`) prints the worker's cProfile top functions to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import polars as pl

DEFAULT_ROWS = 1_000_000
QUICK_ROWS = 100_000
DEFAULT_SEED = 0
SIDES = ("forgeml", "pandas")
STAGES = ("ingest", "clean", "split")
LABEL = "label"
OUTLIER_COLUMN = "income"
NUMERIC_COLUMNS = ("user_id", "age", "income", "hours_per_week", "score", "balance")
MISSING_FRACTION = 0.02
DUPLICATE_FRACTION = 0.01
OUTLIER_FRACTION = 0.0005
SPLIT_RATIOS = (0.8, 0.1, 0.1)
THROUGHPUT_TARGET = 5.0
MEMORY_TARGET = 1.0
# Bump when the generator changes, so that cached files of the old shape are not reused.
_GENERATOR_VERSION = 1


# --- data -----------------------------------------------------------------------------------


def dataset_path(rows: int, seed: int) -> Path:
    """Where the CSV of `rows` rows generated with `seed` is cached."""
    name = f"mixed-v{_GENERATOR_VERSION}-{rows}rows-seed{seed}.csv"
    return Path(tempfile.gettempdir()) / "forgeml-bench" / name


def ensure_dataset(rows: int, seed: int) -> Path:
    """The cached CSV for (rows, seed), generated first when it does not exist yet."""
    path = dataset_path(rows, seed)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        generate_frame(rows, seed).write_csv(partial)
        partial.replace(path)  # atomic: a concurrent run never reads a half-written file
    return path


def _words(rng: np.random.Generator, count: int) -> list[str]:
    """`count` distinct pronounceable pseudo-words."""
    import numpy as np

    syllables = np.array(["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "gu", "po"])
    words: dict[str, None] = {}
    while len(words) < count:
        parts = syllables[rng.integers(0, syllables.size, size=rng.integers(2, 4))]
        words.setdefault("".join(parts), None)
    return list(words)


def _text_column(
    rng: np.random.Generator, rows: int, vocab: list[str], low: int, high: int
) -> pl.Series:
    """Texts of `low`..`high` words drawn from `vocab`, joined with single spaces."""
    import polars as pl

    words = pl.Series(vocab)
    lengths = rng.integers(low, high + 1, size=rows)
    positions = []
    for position in range(high):
        picked = words.gather(rng.integers(0, len(vocab), size=rows))
        positions.append(picked.set(pl.Series(lengths <= position), None).alias(str(position)))
    frame = pl.DataFrame(positions)
    joined = frame.select(pl.concat_str(frame.columns, separator=" ", ignore_nulls=True))
    return joined.to_series().alias("text")


def _base_columns(rng: np.random.Generator, rows: int) -> dict[str, Any]:
    import numpy as np

    cities = [f"city_{name}" for name in _words(rng, 60)]
    income = np.round(rng.normal(55_000, 15_000, size=rows), 2)
    outliers = rng.random(rows) < OUTLIER_FRACTION
    income[outliers] *= rng.uniform(10, 50, size=int(outliers.sum()))
    days = rng.integers(0, 365 * 12, size=rows)
    return {
        "user_id": rng.integers(1_000_000, 10_000_000, size=rows),
        "age": rng.integers(18, 91, size=rows),
        "income": income,
        "hours_per_week": rng.integers(1, 100, size=rows),
        "score": np.round(rng.random(rows), 4),
        "balance": np.round(rng.normal(0, 5_000, size=rows), 2),
        "city": np.array(cities)[rng.integers(0, len(cities), size=rows)],
        "segment": rng.choice(["bronze", "silver", "gold", "platinum"], size=rows),
        "device": rng.choice(["mobile", "desktop", "tablet"], size=rows),
        "signup_date": (np.datetime64("2012-01-01") + days).astype(str),
        LABEL: rng.choice(["stay", "churn", "upgrade"], size=rows, p=[0.7, 0.2, 0.1]),
    }


def generate_frame(rows: int, seed: int) -> pl.DataFrame:
    """The benchmark's rows: deterministic for (rows, seed), every value already text.

    Args:
        rows: total rows, of which ~1% repeat an earlier row exactly.
        seed: the numpy seed.

    Returns:
        A frame of String columns (numbers formatted, ~2% of feature fields `?`).
    """
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    unique = rows - int(rows * DUPLICATE_FRACTION)
    vocab = _words(rng, 400)
    frame = pl.DataFrame(_base_columns(rng, unique)).with_columns(
        _text_column(rng, unique, vocab, 2, 4).alias("title"),
        _text_column(rng, unique, vocab, 5, 12).alias("comment"),
    )
    order = ["user_id", "age", "income", "hours_per_week", "score", "balance", "city"]
    order += ["segment", "device", "title", "comment", "signup_date", LABEL]
    frame = frame.select(order)
    features = [name for name in order if name not in ("user_id", LABEL)]
    missing = {name: rng.random(unique) < MISSING_FRACTION for name in features}
    frame = frame.with_columns(
        pl.when(pl.lit(pl.Series(mask)))
        .then(pl.lit("?"))
        .otherwise(pl.col(name).cast(pl.String))
        .alias(name)
        for name, mask in missing.items()
    ).with_columns(pl.col("user_id").cast(pl.String))
    copies = rng.integers(0, unique, size=rows - unique)
    frame = pl.concat([frame, frame[copies]])
    return frame[rng.permutation(rows)]


# --- workers --------------------------------------------------------------------------------


class Stopwatch:
    """Wall seconds per named stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the body as stage `name`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = time.perf_counter() - start


def cpu_seconds() -> float:
    """User + system CPU seconds this process has used (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    """This process's peak resident set size, in MB (10^6 bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6


def clean_recipe() -> dict[str, Any]:
    """The forgeml clean recipe that matches the pandas baseline's cleaning."""
    return {
        "text": None,  # the baseline does not normalise text either
        "missing_markers": ["?"],
        "drop_duplicates": True,
        "outliers": {"columns": [OUTLIER_COLUMN], "method": "iqr", "factor": 1.5},
        "missing": {
            "strategy": "mode",
            "columns": {name: {"strategy": "median"} for name in NUMERIC_COLUMNS},
        },
    }


def run_forgeml(source: Path, home: Path) -> dict[str, Any]:
    """Ingest, clean and split `source` with forgeml in a fresh workspace under `home`.

    Returns:
        Stage seconds, workspace set-up seconds and the row count of each version.
    """
    from forgeml.core.config import Settings
    from forgeml.core.workspace import Workspace
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions

    watch = Stopwatch()
    workspace = Workspace(Settings(home=home, user="bench"))
    try:
        with watch.stage("setup"):
            _ = workspace.store  # creates and migrates the empty SQLite store
            _ = workspace.artifacts
        with watch.stage("ingest"):
            raw = pipeline.add(workspace, "bench", source, IngestOptions(), label=LABEL)
        with watch.stage("clean"):
            cleaned = pipeline.derive(workspace, "clean", raw.version.ref, clean_recipe())
        split_params = {"ratios": list(SPLIT_RATIOS), "stratify": LABEL, "seed": 0}
        with watch.stage("split"):
            done = pipeline.derive(workspace, "split", cleaned.main.version.ref, split_params)
        rows = [raw.version.rows, cleaned.main.version.rows, done.main.version.rows]
    finally:
        workspace.close()
    setup = watch.seconds.pop("setup")
    return {
        "stages": watch.seconds,
        "setup_s": setup,
        "rows_out": dict(zip(STAGES, rows, strict=True)),
    }


def _pandas_clean(frame: pd.DataFrame) -> pd.DataFrame:
    """Duplicates, then IQR outliers, then imputation: the order forgeml's clean uses."""
    from pandas.api.types import is_numeric_dtype

    frame = frame.drop_duplicates(keep="first")
    low_q, high_q = frame[OUTLIER_COLUMN].quantile([0.25, 0.75])
    spread = 1.5 * (high_q - low_q)
    values = frame[OUTLIER_COLUMN]
    frame = frame[~((values < low_q - spread) | (values > high_q + spread))]
    fills = {
        name: frame[name].median() if is_numeric_dtype(frame[name]) else frame[name].mode()[0]
        for name in frame.columns
        if frame[name].isna().any()
    }
    return frame.fillna(fills)


def _pandas_split(frame: pd.DataFrame) -> pd.DataFrame:
    """Stratified 0.8/0.1/0.1 split with `groupby(label).sample`, seed 0."""
    import pandas as pd

    train = frame.groupby(LABEL).sample(frac=SPLIT_RATIOS[0], random_state=0)
    rest = frame.drop(train.index)
    share = SPLIT_RATIOS[1] / (SPLIT_RATIOS[1] + SPLIT_RATIOS[2])
    validation = rest.groupby(LABEL).sample(frac=share, random_state=0)
    test = rest.drop(validation.index)
    parts = {"train": train, "validation": validation, "test": test}
    return pd.concat([part.assign(__split__=name) for name, part in parts.items()])


def run_pandas(source: Path, out_dir: Path) -> dict[str, Any]:
    """The same work in plain pandas, each stage's output written to Parquet in `out_dir`.

    Returns:
        Stage seconds, the seconds spent in `to_parquet`, and each output's row count.
    """
    import pandas as pd

    watch = Stopwatch()
    writes = Stopwatch()
    rows = []
    # One name rebound stage by stage, so that (as in forgeml) no stage's input outlives it.
    with watch.stage("ingest"):
        frame = pd.read_csv(source, na_values=["?"])
        with writes.stage("ingest"):
            frame.to_parquet(out_dir / "raw.parquet")
    rows.append(len(frame))
    with watch.stage("clean"):
        frame = _pandas_clean(frame)
        with writes.stage("clean"):
            frame.to_parquet(out_dir / "clean.parquet")
    rows.append(len(frame))
    with watch.stage("split"):
        frame = _pandas_split(frame)
        with writes.stage("split"):
            frame.to_parquet(out_dir / "split.parquet")
    rows.append(len(frame))
    return {
        "stages": watch.seconds,
        "parquet_write_s": sum(writes.seconds.values()),
        "rows_out": dict(zip(STAGES, rows, strict=True)),
    }


def worker(side: str, source: Path, profile: bool) -> dict[str, Any]:
    """Run one side once in this process; the figures it returns are printed as JSON.

    Args:
        side: "forgeml" or "pandas".
        source: the CSV.
        profile: print a cProfile of the run (top 30 by cumulative time) to stderr.
    """
    import cProfile
    import pstats

    profiler = cProfile.Profile() if profile else None
    with tempfile.TemporaryDirectory(prefix=f"forgeml-bench-{side}-") as scratch:
        if profiler is not None:
            profiler.enable()
        start_cpu = cpu_seconds()
        if side == "forgeml":
            result = run_forgeml(source, Path(scratch))
        else:
            result = run_pandas(source, Path(scratch))
        used_cpu = cpu_seconds() - start_cpu
        if profiler is not None:
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    result["total_s"] = sum(result["stages"].values())
    # Includes forgeml's workspace set-up (~0.2 s); a steadier figure than wall time on a
    # shared machine, and it shows how much parallelism each side used.
    result["cpu_s"] = used_cpu
    result["peak_rss_mb"] = peak_rss_mb()
    return result


# --- driver ---------------------------------------------------------------------------------


def spawn_worker(side: str, source: Path) -> dict[str, Any]:
    """Run one side in a fresh interpreter and return the JSON it prints last."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("FORGEML_")}
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", side]
    completed = subprocess.run(
        [*command, "--data", str(source)], capture_output=True, text=True, env=env, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the {side} worker failed:\n{completed.stderr.strip()}")
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def summarise(side: str, runs: list[dict[str, Any]], rows: int) -> dict[str, Any]:
    """Medians over the runs of one side."""
    stages = {stage: statistics.median(run["stages"][stage] for run in runs) for stage in STAGES}
    total = statistics.median(run["total_s"] for run in runs)
    return {
        "stages_s": stages,
        "total_s": total,
        "rows_per_s": rows / total,
        "cpu_s": statistics.median(run["cpu_s"] for run in runs),
        "peak_rss_mb": statistics.median(run["peak_rss_mb"] for run in runs),
        "rows_out": runs[0]["rows_out"],
        "runs": runs,
    }


def measure(rows: int, runs: int, seed: int, progress: bool) -> dict[str, Any]:
    """Generate (or reuse) the CSV, run both sides `runs` times alternately, and compare."""
    source = ensure_dataset(rows, seed)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for index in range(runs):
        # Alternate which side goes first, so neither always gets the warmer page cache.
        for side in SIDES if index % 2 == 0 else SIDES[::-1]:
            results[side].append(spawn_worker(side, source))
            if progress:
                done = results[side][-1]
                print(f"  run {index + 1}/{runs} {side}: {done['total_s']:.2f} s", file=sys.stderr)
    ours, theirs = (summarise(side, results[side], rows) for side in SIDES)
    throughput = ours["rows_per_s"] / theirs["rows_per_s"]
    memory = ours["peak_rss_mb"] / theirs["peak_rss_mb"]
    return {
        "rows": rows,
        "csv_mb": round(source.stat().st_size / 1e6, 1),
        "runs": runs,
        "seed": seed,
        "cpu_count": os.cpu_count(),
        "load_average_1min": load,
        "forgeml": ours,
        "pandas": theirs,
        "throughput_ratio": throughput,
        "memory_ratio": memory,
        "targets": {"throughput_ratio_min": THROUGHPUT_TARGET, "memory_ratio_max": MEMORY_TARGET},
        "meets_targets": throughput >= THROUGHPUT_TARGET and memory < MEMORY_TARGET,
    }


def format_table(report: dict[str, Any]) -> str:
    """The figures as a plain-text table."""
    ours, theirs = report["forgeml"], report["pandas"]
    lines = [
        f"forgeml data pipeline vs pandas: {report['rows']:,} rows ({report['csv_mb']} MB CSV), "
        f"median of {report['runs']} run(s); {report['cpu_count']} CPUs, "
        f"load {report['load_average_1min'] or 0:.1f} at start",
        f"{'':<18}{'forgeml':>12}{'pandas':>12}{'pandas/forgeml':>16}",
    ]
    for stage in STAGES:
        mine, base = ours["stages_s"][stage], theirs["stages_s"][stage]
        lines.append(f"{stage + ' (s)':<18}{mine:>12.2f}{base:>12.2f}{base / mine:>15.2f}x")
    total_ratio = theirs["total_s"] / ours["total_s"]
    lines.append(
        f"{'total (s)':<18}{ours['total_s']:>12.2f}{theirs['total_s']:>12.2f}{total_ratio:>15.2f}x"
    )
    lines.append(f"{'rows/s':<18}{ours['rows_per_s']:>12,.0f}{theirs['rows_per_s']:>12,.0f}")
    lines.append(f"{'CPU (s)':<18}{ours['cpu_s']:>12.2f}{theirs['cpu_s']:>12.2f}")
    lines.append(
        f"{'peak RSS (MB)':<18}{ours['peak_rss_mb']:>12,.0f}{theirs['peak_rss_mb']:>12,.0f}"
    )
    rows_out = " -> ".join(str(ours["rows_out"][s]) for s in STAGES)
    base_out = " -> ".join(str(theirs["rows_out"][s]) for s in STAGES)
    lines.append(f"rows per stage: forgeml {rows_out}; pandas {base_out}")
    writes = statistics.median(run["parquet_write_s"] for run in theirs["runs"])
    lines.append(f"(pandas includes {writes:.2f} s of to_parquet; forgeml excludes set-up)")
    verdict = {True: "met", False: "NOT met"}
    throughput, memory = report["throughput_ratio"], report["memory_ratio"]
    lines.append(
        f"throughput forgeml/pandas: {throughput:.2f}x (target >= {THROUGHPUT_TARGET:g}x: "
        f"{verdict[throughput >= THROUGHPUT_TARGET]})"
    )
    lines.append(
        f"peak memory forgeml/pandas: {memory:.2f} (target < {MEMORY_TARGET:g}: "
        f"{verdict[memory < MEMORY_TARGET]})"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=None, help="input rows (default 1,000,000)")
    parser.add_argument("--runs", type=int, default=None, help="runs per side (default 3)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="data seed (default 0)")
    parser.add_argument("--quick", action="store_true", help="100,000 rows, 1 run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON last")
    parser.add_argument("--worker", choices=SIDES, help="run one side once (internal)")
    parser.add_argument("--data", type=Path, help="the CSV a worker reads (default: generated)")
    parser.add_argument("--profile", action="store_true", help="cProfile a --worker run")
    args = parser.parse_args(argv)
    if args.rows is None:
        args.rows = QUICK_ROWS if args.quick else DEFAULT_ROWS
    if args.runs is None:
        args.runs = 1 if args.quick else 3
    if args.rows < 1_000 or args.runs < 1:
        parser.error("--rows must be at least 1000 and --runs at least 1")
    if args.profile and args.worker is None:
        parser.error("--profile profiles one side: add --worker forgeml or --worker pandas")
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = parse_args(argv)
    if args.worker is not None:
        source = args.data or ensure_dataset(args.rows, args.seed)
        print(json.dumps(worker(args.worker, source, args.profile)))
        return 0
    report = measure(args.rows, args.runs, args.seed, progress=not args.json)
    print(format_table(report))
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
