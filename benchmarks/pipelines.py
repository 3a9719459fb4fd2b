"""Benchmark of issue 13: a 20-step pipeline re-run fully cached, on SQLite and PostgreSQL.

What is measured: a pipeline of 20 `command` steps (`sh -c`, each writing one small file;
step i > 0 reads the file of step (i - 1) // 2, so the DAG is a binary tree of depth 4,
every edge a `${steps.NAME.out}` reference) is run once through the scheduler's local
executor (20 jobs: the first, uncached run), then re-run unchanged several times: every
step then comes from the cache (its key computed from its parameters, the digests of its
inputs and upstream outputs, the code version and the packages digest; no job submitted).

Each figure is `load_pipeline` + `run_pipeline` in this process (the file read and
validated, the code version read once: forgeml's version, `git rev-parse HEAD`, the
installed distributions; the run and its 20 step runs recorded), with the workspace's
store already open: what `forgeml pipelines run` adds on top is interpreter start-up and
imports, reported separately as the wall time of the whole command on SQLite.
Medians of the re-runs are reported. Goals: < 0.5 s on SQLite, < 2 s on PostgreSQL.

PostgreSQL is the server at FORGEML_BENCH_PG_URL (default
postgresql+psycopg://postgres@127.0.0.1:5432/test); a fresh database is created for the
run and dropped after. When none answers, its row says so and the SQLite figures stand.

Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/pipelines.py            # 10 cached re-runs
    PYTHONPATH=src .venv/bin/python benchmarks/pipelines.py --quick    # 3 cached re-runs
    PYTHONPATH=src .venv/bin/python benchmarks/pipelines.py --json     # JSON last line
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _cli import make_parser, print_json
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from forgeml.pipelines import load_pipeline, run_pipeline

STEPS = 20
GOALS = {"sqlite": 0.5, "postgresql": 2.0}
PG_URL = os.environ.get("FORGEML_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def write_pipeline(folder: Path, steps: int = STEPS) -> Path:
    """The 20-step binary-tree pipeline of `sh -c` command steps."""
    lines = ["name: bench", "steps:"]
    for i in range(steps):
        lines += [f"  - name: s{i}", "    kind: command", "    outputs: {out: " + f"out{i}.txt}}"]
        if i == 0:
            lines.append(f"    argv: [sh, -c, 'echo {i} > out{i}.txt']")
        else:
            parent = (i - 1) // 2
            lines.append(
                f"    argv: [sh, -c, 'cat \"$0\" > out{i}.txt; echo {i} >> out{i}.txt', "
                f'"${{steps.s{parent}.out}}"]'
            )
    path = folder / "pipeline.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _quiet(_: bytes) -> None:
    pass


def timed_run(workspace: Workspace, path: Path) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    summary = run_pipeline(workspace, load_pipeline(path), output=_quiet)
    return time.perf_counter() - started, summary


def measure_backend(home: Path, db_url: str | None, reruns: int) -> dict[str, Any]:
    """First run and `reruns` cached re-runs on one metadata backend."""
    folder = home / "pipeline"
    folder.mkdir(parents=True)
    path = write_pipeline(folder)
    workspace = Workspace(Settings(home=home, db_url=db_url, user="bench"))
    try:
        workspace.store  # noqa: B018 - open (and migrate) the store outside the timings
        first, summary = timed_run(workspace, path)
        if summary["state"] != "SUCCEEDED" or summary["cached_steps"]:
            raise RuntimeError(f"unexpected first run: {summary['state']} {summary['error']}")
        times = []
        for _ in range(reruns):
            seconds, summary = timed_run(workspace, path)
            if summary["cached_steps"] != STEPS:
                raise RuntimeError(f"re-run not fully cached: {summary['cached_steps']}/{STEPS}")
            times.append(seconds)
    finally:
        workspace.close()
    return {
        "first_seconds": first,
        "cached_seconds": times,
        "cached_median": statistics.median(times),
    }


def cli_rerun_seconds(home: Path) -> float:
    """Wall time of a whole `forgeml pipelines run` (fully cached) on SQLite."""
    env = dict(os.environ, FORGEML_HOME=str(home), FORGEML_USER="bench")
    env.pop("FORGEML_DB_URL", None)
    command = [sys.executable, "-m", "forgeml.cli", "pipelines", "run"]
    command += [str(home / "pipeline" / "pipeline.yaml"), "--json"]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0 or json.loads(done.stdout)["cached_steps"] != STEPS:
        raise RuntimeError(f"forgeml pipelines run failed: {done.stderr[-2000:]}")
    return seconds


@contextmanager
def postgres_database() -> Iterator[str | None]:
    """A fresh database on the server at PG_URL (None when no server answers)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    admin = create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = f"forgeml_bench_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError:
        admin.dispose()
        yield None
        return
    try:
        yield PG_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def measure(reruns: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"steps": STEPS, "reruns": reruns, "goals": GOALS}
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "sqlite"
        figures["sqlite"] = measure_backend(home, None, reruns)
        figures["cli_rerun_seconds_sqlite"] = cli_rerun_seconds(home)
        with postgres_database() as url:
            if url is None:
                figures["postgresql"] = None
            else:
                figures["postgresql"] = measure_backend(Path(scratch) / "pg", url, reruns)
    for backend, goal in GOALS.items():
        result = figures[backend]
        figures[f"{backend}_goal_met"] = None if result is None else result["cached_median"] < goal
    figures["load_average"] = os.getloadavg()
    figures["cpus"] = len(os.sched_getaffinity(0))
    return figures


def print_table(figures: dict[str, Any]) -> None:
    print(f"a {STEPS}-step pipeline (command steps), median of {figures['reruns']} cached re-runs")
    print(f"{'backend':<12}{'first run s':>14}{'cached re-run s':>18}{'goal s':>9}  verdict")
    for backend, goal in GOALS.items():
        result = figures[backend]
        if result is None:
            print(f"{backend:<12}{'(no server at ' + PG_URL + ')':>14}")
            continue
        verdict = "met" if figures[f"{backend}_goal_met"] else "NOT met"
        print(
            f"{backend:<12}{result['first_seconds']:>14.2f}{result['cached_median']:>18.3f}"
            f"{goal:>9.1f}  {verdict}"
        )
    cli_seconds = figures["cli_rerun_seconds_sqlite"]
    print(f"whole `forgeml pipelines run` (cached, SQLite): {cli_seconds:.2f} s")
    load = ", ".join(f"{value:.2f}" for value in figures["load_average"])
    print(f"load average: {load} on {figures['cpus']} CPUs")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = make_parser(__doc__, "3 cached re-runs per backend")
    parser.add_argument("--reruns", type=int, default=10, help="cached re-runs per backend")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table (and JSON)."""
    args = parse_args(argv)
    figures = measure(3 if args.quick else args.reruns)
    print_table(figures)
    print_json(args, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
