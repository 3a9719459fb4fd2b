"""Benchmark of issues 2 and 12: forgeml's data pipeline against pandas, polars and DuckDB.

What is measured: a deterministic mixed-type CSV (ints, floats, categories, free text, dates
as text, a `label` column, ~2% of fields written as `?`, ~1% exact duplicate rows, a few
outliers; 1,000,000 rows is ~150 MB) goes through three stages on each side:

- forgeml: `pipeline.add` (ingest to a Parquet version) -> `derive("clean")` (`?` to null,
  exact duplicates dropped, IQR outliers of `income` dropped, median / mode imputation)
  -> `derive("split")` (0.8/0.1/0.1 stratified on `label`, seed 0), in a fresh FORGEML_HOME.
  Every stage records a version: canonical Parquet, digest, SQLite row (the quality
  profile is computed on first use, by `data show` / `data diff`, so no stage pays for it).
- pandas: `read_csv(na_values=["?"])`, `drop_duplicates`, the IQR filter, `fillna` with
  median / mode, `groupby(label).sample(...)` for the split; each stage writes its output
  with `to_parquet`, as forgeml persists each of its versions.
- polars (a plain eager script): `read_csv(null_values=["?"])`, `unique()`, the IQR filter
  (polars' default quantiles), `fill_null` with median / `drop_nulls().mode().first()`, and
  a seeded shuffle inside each `label` cut at 0.8/0.9; each stage's frame `write_parquet`.
- DuckDB (SQL on an in-memory database): `read_csv(nullstr='?')` (sniffing only BIGINT,
  DOUBLE and VARCHAR, the types the others infer), `SELECT DISTINCT *`, the
  IQR filter with `quantile_cont`, `COALESCE` with `median` / `mode`, and `row_number()`
  over a seeded hash inside each `label` for the split; each stage a table, `COPY`'d to Parquet.

The peers write Parquet with their own defaults (pandas/pyarrow and DuckDB snappy, polars
zstd). Mode ties are broken however each tool breaks them, and the split's exact membership
differs between sides; the row count out of each stage is printed and should match (the IQR
bounds of pandas and DuckDB are interpolated, forgeml's and polars' the nearest rank, so an
income right on a bound could move one row).

Each side runs in its own subprocess (`--worker forgeml|pandas|polars|duckdb`), so its peak
RSS (the process's `ru_maxrss`) is its own; the order of the sides rotates from run to run
and medians are reported. Stage times exclude interpreter start-up, imports and creating the
empty workspace (or database); the CSV is generated once, cached under the temp dir by
(rows, seed), and never timed.

Figures: seconds per stage and in total, rows/s (input rows / total seconds), CPU seconds,
peak RSS MB, and the ratios of issue 12 with its goals: forgeml's end-to-end throughput over
pandas' (goal >= 3x) and over polars' (goal >= 0.8x), and forgeml's ingest against pandas'
`read_csv` + `to_parquet` (goal: no slower, >= 1x). DuckDB's ratio and the peak-memory
ratios are reported without a goal. Also shown: the seconds forgeml's first `data show` of
the ingested version spends computing its quality profile (`catalog.profile_of`, after the
three stages; in no stage or total, but in forgeml's CPU seconds and peak RSS).

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

from _cli import make_parser, print_json

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import polars as pl

DEFAULT_ROWS = 1_000_000
QUICK_ROWS = 100_000
DEFAULT_SEED = 0
SIDES = ("forgeml", "pandas", "polars", "duckdb")
PEERS = SIDES[1:]
STAGES = ("ingest", "clean", "split")
LABEL = "label"
OUTLIER_COLUMN = "income"
NUMERIC_COLUMNS = ("user_id", "age", "income", "hours_per_week", "score", "balance")
MISSING_FRACTION = 0.02
DUPLICATE_FRACTION = 0.01
OUTLIER_FRACTION = 0.0005
SPLIT_RATIOS = (0.8, 0.1, 0.1)
# Issue 12's goals: forgeml's throughput over each peer's, and its ingest over pandas'.
GOALS = {"vs_pandas": 3.0, "vs_polars": 0.8, "ingest_vs_pandas": 1.0}
GOAL_TEXT = {
    "vs_pandas": "forgeml vs pandas, end to end",
    "vs_polars": "forgeml vs polars, end to end",
    "vs_duckdb": "forgeml vs DuckDB, end to end",
    "ingest_vs_pandas": "ingest vs pandas read_csv + to_parquet",
}
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
    from forgeml.data import catalog, pipeline
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
        # Not a stage: what the first `data show` of the ingested version adds, once.
        with watch.stage("profile"):
            catalog.profile_of(workspace, raw.version)
    finally:
        workspace.close()
    setup = watch.seconds.pop("setup")
    profile = watch.seconds.pop("profile")
    return {
        "stages": watch.seconds,
        "setup_s": setup,
        "deferred_profile_s": profile,
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


def _polars_clean(frame: pl.DataFrame) -> pl.DataFrame:
    """Duplicates, IQR outliers of `income` (nulls kept), then median / mode imputation."""
    import polars as pl

    frame = frame.unique()
    income = pl.col(OUTLIER_COLUMN)
    low, high = frame.select(income.quantile(0.25).alias("q1"), income.quantile(0.75)).row(0)
    spread = 1.5 * (high - low)
    frame = frame.filter(income.is_null() | income.is_between(low - spread, high + spread))
    fills = []
    for name, dtype in frame.schema.items():
        if frame[name].null_count() == 0:
            continue
        column = pl.col(name)
        if dtype.is_integer():
            fill = column.median().round().cast(dtype)
        elif dtype.is_numeric():
            fill = column.median()
        else:
            fill = column.drop_nulls().mode().first()  # polars counts null as a value
        fills.append(column.fill_null(fill))
    return frame.with_columns(fills)


def _polars_split(frame: pl.DataFrame) -> pl.DataFrame:
    """Stratified 0.8/0.1/0.1 split: a seeded shuffle inside each label, cut at the ratios."""
    import polars as pl

    share = pl.int_range(pl.len()).shuffle(seed=0).over(LABEL) / pl.len().over(LABEL)
    train, validation = SPLIT_RATIOS[0], SPLIT_RATIOS[0] + SPLIT_RATIOS[1]
    split = (
        pl.when(share < train)
        .then(pl.lit("train"))
        .when(share < validation)
        .then(pl.lit("validation"))
        .otherwise(pl.lit("test"))
    )
    return frame.with_columns(split.alias("__split__"))


def run_polars(source: Path, out_dir: Path) -> dict[str, Any]:
    """The same work as a plain eager polars script, each stage written to Parquet.

    Returns:
        Stage seconds, the seconds spent in `write_parquet`, and each output's row count.
    """
    import polars as pl

    watch = Stopwatch()
    writes = Stopwatch()
    rows = []
    with watch.stage("ingest"):
        frame = pl.read_csv(source, null_values=["?"])
        with writes.stage("ingest"):
            frame.write_parquet(out_dir / "raw.parquet")
    rows.append(frame.height)
    with watch.stage("clean"):
        frame = _polars_clean(frame)
        with writes.stage("clean"):
            frame.write_parquet(out_dir / "clean.parquet")
    rows.append(frame.height)
    with watch.stage("split"):
        frame = _polars_split(frame)
        with writes.stage("split"):
            frame.write_parquet(out_dir / "split.parquet")
    rows.append(frame.height)
    return {
        "stages": watch.seconds,
        "parquet_write_s": sum(writes.seconds.values()),
        "rows_out": dict(zip(STAGES, rows, strict=True)),
    }


_SQL_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"}
_SQL_INTEGERS |= {f"U{name}" for name in _SQL_INTEGERS}
_SQL_NUMBERS = _SQL_INTEGERS | {"FLOAT", "DOUBLE", "REAL"}


# The types pandas, polars and forgeml infer from this CSV: DuckDB alone would parse dates.
_SQL_TYPE_CANDIDATES = "['BIGINT', 'DOUBLE', 'VARCHAR']"


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _duckdb_clean_sql(columns: list[tuple[str, str]]) -> str:
    """The clean stage as one SQL statement over table `raw`, for its (name, type) columns."""

    def fill(name: str, kind: str) -> str:
        quoted = f'"{name}"'
        if kind in _SQL_INTEGERS:
            return f"CAST(round(median({quoted})) AS {kind})"
        if kind in _SQL_NUMBERS or kind.startswith("DECIMAL"):
            return f"CAST(median({quoted}) AS {kind})"
        return f"mode({quoted})"

    income = f'"{OUTLIER_COLUMN}"'
    fills = ", ".join(f'{fill(name, kind)} AS "{name}"' for name, kind in columns)
    coalesced = ", ".join(
        f'COALESCE(kept."{name}", fills."{name}") AS "{name}"' for name, _ in columns
    )
    return f"""
        CREATE TABLE clean AS
        WITH dedup AS (SELECT DISTINCT * FROM raw),
        bounds AS (
            SELECT quantile_cont({income}, 0.25) AS q1, quantile_cont({income}, 0.75) AS q3
            FROM dedup
        ),
        kept AS (
            SELECT dedup.* FROM dedup, bounds
            WHERE dedup.{income} IS NULL
               OR dedup.{income} BETWEEN q1 - 1.5 * (q3 - q1) AND q3 + 1.5 * (q3 - q1)
        ),
        fills AS (SELECT {fills} FROM kept)
        SELECT {coalesced} FROM kept, fills
    """


def _duckdb_split_sql(seed: int) -> str:
    """The split stage over table `clean`: rows ranked by a seeded hash inside each label."""
    train, validation = SPLIT_RATIOS[0], SPLIT_RATIOS[0] + SPLIT_RATIOS[1]
    return f"""
        CREATE TABLE split AS
        SELECT * EXCLUDE (position, stratum_rows),
            CASE WHEN position < {train} * stratum_rows THEN 'train'
                 WHEN position < {validation} * stratum_rows THEN 'validation'
                 ELSE 'test' END AS __split__
        FROM (
            SELECT *,
                row_number() OVER (PARTITION BY "{LABEL}" ORDER BY hash(rowid, {seed})) - 1
                    AS position,
                count(*) OVER (PARTITION BY "{LABEL}") AS stratum_rows
            FROM clean
        )
    """


def run_duckdb(source: Path, out_dir: Path) -> dict[str, Any]:
    """The same work in DuckDB SQL, each stage a table `COPY`'d to Parquet in `out_dir`.

    Returns:
        Stage seconds, the seconds spent in `COPY ... TO`, and each output's row count.
    """
    import duckdb

    watch = Stopwatch()
    writes = Stopwatch()
    rows = []
    connection = duckdb.connect()  # in memory
    try:

        def copy(stage: str, table: str) -> None:
            target = _sql_literal(str(out_dir / f"{table}.parquet"))
            with writes.stage(stage):
                connection.execute(f"COPY {table} TO {target} (FORMAT parquet)")

        def count(table: str) -> int:
            return int(connection.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0])

        with watch.stage("ingest"):
            connection.execute(
                f"CREATE TABLE raw AS SELECT * FROM read_csv({_sql_literal(str(source))}, "
                f"nullstr = '?', auto_type_candidates = {_SQL_TYPE_CANDIDATES})"
            )
            copy("ingest", "raw")
        rows.append(count("raw"))
        with watch.stage("clean"):
            columns = [(row[0], row[1]) for row in connection.execute("DESCRIBE raw").fetchall()]
            connection.execute(_duckdb_clean_sql(columns))
            connection.execute("DROP TABLE raw")
            copy("clean", "clean")
        rows.append(count("clean"))
        with watch.stage("split"):
            connection.execute(_duckdb_split_sql(seed=0))
            connection.execute("DROP TABLE clean")
            copy("split", "split")
        rows.append(count("split"))
    finally:
        connection.close()
    return {
        "stages": watch.seconds,
        "parquet_write_s": sum(writes.seconds.values()),
        "rows_out": dict(zip(STAGES, rows, strict=True)),
    }


RUNNERS = {"forgeml": run_forgeml, "pandas": run_pandas, "polars": run_polars, "duckdb": run_duckdb}


def worker(side: str, source: Path, profile: bool) -> dict[str, Any]:
    """Run one side once in this process; the figures it returns are printed as JSON.

    Args:
        side: one of `SIDES`.
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
        result = RUNNERS[side](source, Path(scratch))
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


def ratios(sides: dict[str, dict[str, Any]]) -> dict[str, float]:
    """forgeml's throughput over each peer's, and its ingest speed over pandas' ingest."""
    ours = sides["forgeml"]
    found = {f"vs_{peer}": ours["rows_per_s"] / sides[peer]["rows_per_s"] for peer in PEERS}
    found["ingest_vs_pandas"] = sides["pandas"]["stages_s"]["ingest"] / ours["stages_s"]["ingest"]
    return found


def measure(rows: int, runs: int, seed: int, progress: bool) -> dict[str, Any]:
    """Generate (or reuse) the CSV, run every side `runs` times in rotation, and compare."""
    source = ensure_dataset(rows, seed)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    results: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for index in range(runs):
        # Rotate which side goes first, so no side always gets the warmer page cache.
        shift = index % len(SIDES)
        for side in SIDES[shift:] + SIDES[:shift]:
            results[side].append(spawn_worker(side, source))
            if progress:
                done = results[side][-1]
                print(f"  run {index + 1}/{runs} {side}: {done['total_s']:.2f} s", file=sys.stderr)
    sides = {side: summarise(side, results[side], rows) for side in SIDES}
    found = ratios(sides)
    goals_met = {name: found[name] >= goal for name, goal in GOALS.items()}
    rows_out = {side: sides[side]["rows_out"] for side in SIDES}
    return {
        "rows": rows,
        "csv_mb": round(source.stat().st_size / 1e6, 1),
        "runs": runs,
        "seed": seed,
        "cpu_count": os.cpu_count(),
        "load_average_1min": load,
        **sides,
        "ratios": found,
        "memory_ratios": {
            f"vs_{peer}": sides["forgeml"]["peak_rss_mb"] / sides[peer]["peak_rss_mb"]
            for peer in PEERS
        },
        "rows_out_match": all(out == rows_out["forgeml"] for out in rows_out.values()),
        "targets": {f"{name}_min": goal for name, goal in GOALS.items()},
        "goals_met": goals_met,
        "meets_targets": all(goals_met.values()),
    }


def format_table(report: dict[str, Any]) -> str:
    """The figures as a plain-text table."""
    sides = {side: report[side] for side in SIDES}
    width = 12
    lines = [
        f"forgeml data pipeline vs {', '.join(PEERS)}: {report['rows']:,} rows "
        f"({report['csv_mb']} MB CSV), median of {report['runs']} run(s); "
        f"{report['cpu_count']} CPUs, load {report['load_average_1min'] or 0:.1f} at start",
        f"{'':<18}" + "".join(f"{side:>{width}}" for side in SIDES),
    ]

    def row(label: str, values: list[float], spec: str) -> str:
        return f"{label:<18}" + "".join(f"{value:>{width}{spec}}" for value in values)

    for stage in STAGES:
        lines.append(row(f"{stage} (s)", [sides[s]["stages_s"][stage] for s in SIDES], ".2f"))
    lines.append(row("total (s)", [sides[s]["total_s"] for s in SIDES], ".2f"))
    lines.append(row("rows/s", [sides[s]["rows_per_s"] for s in SIDES], ",.0f"))
    lines.append(row("CPU (s)", [sides[s]["cpu_s"] for s in SIDES], ".2f"))
    lines.append(row("peak RSS (MB)", [sides[s]["peak_rss_mb"] for s in SIDES], ",.0f"))
    for side in SIDES:
        out = " -> ".join(f"{sides[side]['rows_out'][stage]:,}" for stage in STAGES)
        lines.append(f"rows per stage, {side + ':':<9}{out}")
    match = "yes" if report["rows_out_match"] else "NO (see above)"
    lines.append(f"rows per stage match across sides: {match}")
    writes = {
        peer: statistics.median(run["parquet_write_s"] for run in sides[peer]["runs"])
        for peer in PEERS
    }
    shown = ", ".join(f"{peer} {seconds:.2f} s" for peer, seconds in writes.items())
    lines.append(f"(Parquet writes inside the peers' stages: {shown}; forgeml excludes set-up)")
    deferred = statistics.median(run["deferred_profile_s"] for run in sides["forgeml"]["runs"])
    lines.append(
        f"(forgeml's quality profile of the ingested version, computed on first use by "
        f"`data show`, outside the stages: {deferred:.2f} s)"
    )
    verdict = {True: "met", False: "NOT met"}
    for name, value in report["ratios"].items():
        goal = GOALS.get(name)
        judged = f"goal >= {goal:g}x: {verdict[value >= goal]}" if goal else "no goal"
        lines.append(f"{GOAL_TEXT[name]}: {value:.2f}x ({judged})")
    memory = ", ".join(f"{k[3:]} {v:.2f}" for k, v in report["memory_ratios"].items())
    lines.append(f"peak memory forgeml/peer: {memory} (no goal)")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = make_parser(__doc__, "100,000 rows, 1 run")
    parser.add_argument("--rows", type=int, default=None, help="input rows (default 1,000,000)")
    parser.add_argument("--runs", type=int, default=None, help="runs per side (default 3)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="data seed (default 0)")
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
        parser.error("--profile profiles one side: add --worker with one of " + ", ".join(SIDES))
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
    print_json(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
