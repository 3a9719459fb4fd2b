from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from forgeml.cli.demo import packaged_data

REPO = Path(__file__).resolve().parents[2]


def clone_without_shared(tmp_path: Path) -> Path:
    """What `make demo` reads of a clone (examples/adult), with no ../shared beside it."""
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "examples" / "adult", clone / "examples" / "adult")
    config = clone / "examples" / "adult" / "train.yaml"
    text = config.read_text(encoding="utf-8")
    assert "epochs: 8\n" in text
    config.write_text(text.replace("epochs: 8\n", "epochs: 2\n"), encoding="utf-8")  # quicker
    assert not (tmp_path / "shared").exists()
    return clone


def test_the_demo_data_ships_with_its_attribution() -> None:
    folder = packaged_data()
    assert sorted(path.name for path in folder.iterdir()) == [
        "README.md",
        "adult.data.gz",
        "adult.names",
        "adult.test.gz",
    ]
    notice = (folder / "README.md").read_text(encoding="utf-8")
    assert "UCI Machine Learning Repository" in notice
    assert "CC BY 4.0" in notice


def test_demo_without_data_is_one_clear_error(cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(REPO)
    result = cli("demo", "--data-dir", tmp_path)
    assert result.code == 1
    assert result.stderr.startswith("error: Demo data")
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_demo_runs_the_main_job_and_the_closed_loop_from_a_clone_without_shared_data(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """`demo` (the main job, then the loop), then `demo --no-loop` again in the same home:
    one run of each rather than a test per flag that repeats the main job."""
    from tests.serve.test_deployments import server_pids

    monkeypatch.chdir(clone_without_shared(tmp_path))
    result = cli("demo")

    assert result.code == 0, result.stderr
    # the main job
    assert "adult-features@v1" in result.stdout
    assert "every digest matches" in result.stdout
    assert "registered adult-mlp@v1" in result.stdout
    assert "promoted adult-mlp@v1 to @production" in result.stdout
    assert "audit log intact" in result.stdout
    assert "through the gateway" in result.stdout
    assert "a request without a key: HTTP 401" in result.stdout
    assert "deployment 'adult' stopped" in result.stdout
    source = json.loads(cli("data", "show", "adult@v1", "--json").stdout)["recipe"]["params"]
    assert Path(source["source"]) == packaged_data() / "adult.data.gz"
    # the loop
    out = " ".join(result.stdout.split())  # the table wraps: check words that fit a cell
    for event in (
        "ForgemlDriftDetected",
        "retrain succeeded",
        "gate succeeded",
        "canary succeeded",
        "promoted adult-mlp@v2",
    ):
        assert event in out, result.stdout
    assert "alert -> canary promoted" in out and "@production is adult-mlp@v2" in out
    assert "0 failed requests" in out
    assert out.index("ForgemlDriftDetected") < out.index("loop started")
    assert out.count("loop started") == 1  # alerts during the loop join it, none after it
    assert "policy 'adult' removed after its loop" in out
    assert server_pids("adult") == []  # the demo leaves no model server behind

    # again without the loop, on the same home: the same data versions, one more train job
    jobs_before = json.loads(cli("jobs", "list", "--json").stdout)
    versions_before = cli("data", "list", "--json").stdout
    assert len(versions_before) > 0
    again = cli("demo", "--no-loop")
    assert again.code == 0, again.stderr
    assert cli("data", "list", "--json").stdout == versions_before  # same content, same versions
    assert "registered adult-mlp@v3" in again.stdout  # v2 is the loop's challenger
    assert "loop started" not in again.stdout and "deployment 'adult' stopped" in again.stdout
    jobs = json.loads(cli("jobs", "list", "--json").stdout)
    new_jobs = [job for job in jobs if job["job_id"] not in {j["job_id"] for j in jobs_before}]
    assert [(job["kind"], job["state"]) for job in new_jobs] == [("train", "SUCCEEDED")]
    assert server_pids("adult") == []
