from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests._wait import Gate, wait_until
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult

Cli = Callable[..., CliResult]
PY = sys.executable
FORGEML = str(Path(sys.executable).parent / "forgeml")


def test_submit_runs_in_the_foreground_without_a_server(cli: Cli) -> None:
    result = cli("jobs", "submit", "--name", "hello", "--", PY, "-c", "print('hello from job')")
    assert_ok(result)
    assert "hello from job" in result.stdout
    (job,) = json_out(cli("jobs", "list", "--json"))
    assert (job["name"], job["state"], job["attempts"]) == ("hello", "SUCCEEDED", 1)
    detail = json_out(cli("jobs", "show", "hello", "--json"))
    assert [e["to"] for e in detail["events"]] == ["PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED"]
    assert detail["attempts"][0]["exit_code"] == 0
    logs = cli("jobs", "logs", job["job_id"][:8])
    assert_ok(logs)
    assert logs.stdout.strip() == "hello from job"


def test_submit_json_prints_only_the_job(cli: Cli) -> None:
    job = json_out(cli("jobs", "submit", "--json", "--", PY, "-c", "print('noise')"))
    assert job["state"] == "SUCCEEDED" and job["command"][0] == PY


def test_a_failing_job_is_one_sentence_with_its_log_tail_in_show(cli: Cli) -> None:
    code = "import sys; print('it broke here'); sys.exit(4)"
    result = cli("jobs", "submit", "--max-retries", "1", "--backoff", "0.1", "--", PY, "-c", code)
    assert_cli_error(result, "The job failed: attempt 2 exited with code 4.")
    detail = json_out(cli("jobs", "show", PY.rsplit("/", 1)[-1], "--json"))
    assert detail["state"] == "FAILED" and "it broke here" in detail["error"]
    assert [a["state"] for a in detail["attempts"]] == ["FAILED", "FAILED"]


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--gpus", "10000"], "can never run: one worker needs", 1),
        (["--memory", "-1"], "Invalid job resources.memory_gb", 1),
        (["--queue", "nope"], "No queue named 'nope'", 1),
        (["--priority", "urgent"], "Unknown priority class 'urgent'", 1),
        (["--env", "NOEQUALS"], "Invalid --env 'NOEQUALS'", 2),
    ],
)
def test_bad_submissions_are_rejected_with_the_reason(
    cli: Cli, args: list[str], message: str, code: int
) -> None:
    assert_cli_error(cli("jobs", "submit", *args, "--", "true"), message, code=code)
    assert json_out(cli("jobs", "list", "--json")) == []


def test_queues_create_list_show(cli: Cli) -> None:
    created = json_out(
        cli(
            "queues",
            "create",
            "research",
            "--weight",
            "3",
            "--gpus",
            "2",
            "--no-reclaimable",
            "--json",
        )
    )
    assert created["capability"] == {"gpus": 2} and created["reclaimable"] is False
    names = [q["name"] for q in json_out(cli("queues", "list", "--json"))]
    assert names == ["default", "research"]
    assert_ok(cli("jobs", "submit", "--detach", "--queue", "research", "--", "true"))
    shown = json_out(cli("queues", "show", "research", "--json"))
    assert shown["jobs"] == {"PENDING": 1} and shown["weight"] == 3
    assert_cli_error(cli("queues", "create", "research"), "already exists")
    assert_cli_error(cli("queues", "create", "x", "--weight", "0"), "Invalid queue weight", code=2)
    assert_cli_error(cli("queues", "show", "ghost"), "No queue named 'ghost'")


def test_detached_job_can_be_cancelled_and_retried(cli: Cli) -> None:
    job = json_out(cli("jobs", "submit", "--detach", "--json", "--", "true"))
    assert job["state"] == "PENDING"
    assert json_out(cli("jobs", "cancel", job["job_id"], "--json"))["state"] == "CANCELLED"
    assert_cli_error(cli("jobs", "cancel", job["job_id"]), "already ended CANCELLED")
    assert json_out(cli("jobs", "retry", job["job_id"], "--json"))["state"] == "PENDING"
    assert_cli_error(cli("jobs", "show", "ghost"), "No job 'ghost'")


# ---- a real `forgeml server`, killed mid-job and restarted


@pytest.fixture
def server_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("FORGEML_DB_URL", "FORGEML_ARTIFACTS_URL"):
        env.pop(key, None)
    return env | {"FORGEML_HOME": str(tmp_path / "home"), "FORGEML_USER": "tester"}


def _start_server(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [FORGEML, "server", "--interval", "0.2", "--grace", "5"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _forgeml(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FORGEML, *args], env=env, capture_output=True, text=True, check=False)


def _job(env: dict[str, str], job_id: str) -> dict[str, object]:
    result = _forgeml(env, "jobs", "show", job_id, "--json")
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def _wait(condition: Callable[[], bool], timeout: float = 60) -> None:
    wait_until(condition, timeout, "the job's condition", interval=0.2)


@pytest.fixture
def servers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_killing_the_server_mid_job_loses_nothing(
    tmp_path: Path,
    server_env: dict[str, str],
    servers: list[subprocess.Popen[bytes]],
    gate: Gate,
) -> None:
    log = tmp_path / "server.log"
    servers.append(_start_server(server_env, log))
    lease = tmp_path / "home" / "scheduler.json"
    _wait(lease.exists)
    code = f"{gate.wait_code}\nprint('finished')"
    submitted = _forgeml(server_env, "jobs", "submit", "--json", "--", PY, "-c", code)
    assert submitted.returncode == 0, submitted.stderr
    job_id = str(json.loads(submitted.stdout)["job_id"])
    _wait(lambda: _job(server_env, job_id)["state"] == "RUNNING")

    servers[0].send_signal(signal.SIGKILL)  # the control plane dies mid-job
    servers[0].wait()
    assert _job(server_env, job_id)["state"] == "RUNNING"
    # its lease is stale now: a submit would run in the foreground, a new server may start
    servers.append(_start_server(server_env, log))
    _wait(lambda: json.loads(lease.read_text())["pid"] == servers[1].pid)
    gate.release()
    _wait(lambda: _job(server_env, job_id)["state"] == "SUCCEEDED")
    detail = _job(server_env, job_id)
    assert len(detail["attempts"]) == 1  # type: ignore[arg-type]
    logs = _forgeml(server_env, "jobs", "logs", job_id)
    assert logs.stdout.strip() == "finished"
    assert "adopted attempt 1" in log.read_text()
    servers[1].send_signal(signal.SIGTERM)
    assert servers[1].wait(timeout=30) == 0
    assert not lease.exists()


def test_export_writes_a_volcano_job_for_the_gang(cli: Cli, tmp_path: Path) -> None:
    job = json_out(cli("jobs", "submit", "--detach", "--json", "--workers", "2", "--", "true"))
    result = cli("jobs", "export", job["job_id"], "--format", "volcano", "--image", "img:1")
    assert_ok(result)
    assert "batch.volcano.sh/v1alpha1" in result.stdout and "minAvailable: 2" in result.stdout
    out = tmp_path / "job.yaml"
    assert_ok(cli("jobs", "export", job["job_id"], "-o", out))
    assert "kind: Job" in out.read_text()
    assert_cli_error(cli("jobs", "export", job["job_id"], "--format", "slurm"), "--format", code=2)


def test_a_server_whose_gateway_port_is_taken_fails_in_one_sentence(
    server_env: dict[str, str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [FORGEML, "server", "--gateway-port", str(port)],
            env=server_env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert_cli_error(
        CliResult(result.returncode, result.stdout, result.stderr),
        f"Cannot listen on 127.0.0.1:{port}",
    )
    assert not (Path(server_env["FORGEML_HOME"]) / "scheduler.json").exists()  # lease let go
