from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_demo_runs_the_main_job_end_to_end(
    cli, shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(REPO)
    result = cli("demo", "--data-dir", shared_data)
    assert result.code == 0, result.stderr
    assert "adult-features@v1" in result.stdout
    assert "every digest matches" in result.stdout
    assert "registered adult-mlp@v1" in result.stdout
    assert "promoted adult-mlp@v1 to @production" in result.stdout
    assert "audit log intact" in result.stdout
    assert "through the gateway" in result.stdout
    assert "a request without a key: HTTP 401" in result.stdout
    assert "deployment 'adult' stopped" in result.stdout
    jobs = json.loads(cli("jobs", "list", "--json").stdout)
    assert [(job["kind"], job["state"]) for job in jobs] == [("train", "SUCCEEDED")]
    listed = cli("data", "list", "--json")
    assert len(listed.stdout) > 0
    versions_before = listed.stdout
    again = cli("demo", "--data-dir", shared_data)
    assert again.code == 0
    assert cli("data", "list", "--json").stdout == versions_before  # same content, same versions
    assert "registered adult-mlp@v2" in again.stdout


def test_demo_without_data_is_one_clear_error(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(REPO)
    result = cli("demo", "--data-dir", tmp_path)
    assert result.code == 1
    assert result.stderr.startswith("error: Demo data")
    assert "Traceback" not in result.stderr
