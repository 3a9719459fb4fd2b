from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from _cp_seed import METRICS, PARAMS, make_runs, seed
from control_plane import prepare

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow  # MLflow's schema migrations take seconds
def test_seeded_runs_land_in_both_stores_with_their_params_and_metrics(tmp_path: Path) -> None:
    forgeml_url, mlflow_url, experiment = prepare(tmp_path / "home", None, None)
    seed(forgeml_url, mlflow_url, experiment, 30)
    mlflow = create_engine(mlflow_url)
    with mlflow.connect() as connection:
        counts = {
            table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("runs", "params", "metrics", "latest_metrics")
        }
        accuracy = connection.execute(
            text("SELECT value FROM latest_metrics WHERE key = 'accuracy' AND run_uuid = :id"),
            {"id": next(make_runs(1)).run_id},
        ).scalar_one()
    mlflow.dispose()
    assert counts == {"runs": 30, "params": 30 * PARAMS, "metrics": 30 * METRICS,
                      "latest_metrics": 30 * METRICS}  # fmt: skip
    assert accuracy == next(make_runs(1)).metrics["accuracy"]
    forgeml = create_engine(forgeml_url)
    with forgeml.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM runs")).scalar_one() == 30
    forgeml.dispose()


@pytest.mark.slow
def test_quick_run_prints_both_servers_figures_as_json() -> None:
    env = {k: v for k, v in os.environ.items() if k != "FORGEML_TEST_PG_URL"}  # SQLite only
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "control_plane.py"), "--quick", "--json"],
        env=env, capture_output=True, text=True, check=False, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    assert figures["runs"] == 1000 and "postgresql" not in figures
    sqlite = figures["sqlite"]
    for server, queries in (("forgeml", {"status", "name_status"}),
                            ("mlflow", {"filter_sort", "list"})):  # fmt: skip
        assert set(sqlite[server]) == queries
        for query in sqlite[server].values():
            assert 0 < query["p50_ms"] <= query["p95_ms"]
    assert sqlite["reads_per_second_token"] > 0 and sqlite["reads_per_second_no_auth"] > 0
    assert sqlite["token_check_us"] > 0
    assert isinstance(sqlite["target_met"], bool)
