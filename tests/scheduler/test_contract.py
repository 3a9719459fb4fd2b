from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forgeml.core.errors import ConfigError, ForgemlError, InvalidDataError, UsageError
from forgeml.core.workspace import Workspace
from forgeml.scheduler.contract import (
    PREEMPTED_EXIT_CODE,
    JobContext,
    JobResult,
    Outcome,
    read_result,
    result_path,
    write_result,
)
from forgeml.scheduler.submit import job_result, raise_for, submit_and_run

PY = sys.executable

# a job module's main: its body's error or outputs go to the result file
JOB = """
import atexit, sys
from forgeml.core.errors import ConfigError, UsageError
from forgeml.scheduler.contract import JobPreempted, run_job

def body(context):
    sys.stderr.write("error: a line that only looks like an error\\n")
    atexit.register(lambda: sys.stderr.write("error: the log's last error line lies\\n"))
    what = sys.argv[1]
    if what == "config":
        raise ConfigError("The real sentence.")
    if what == "usage":
        raise UsageError("Give a CONFIG file.")
    if what == "bug":
        raise KeyError("nope")
    if what == "stop":
        raise JobPreempted({"run_id": "r1"})
    return {"run_id": "r1", "attempt": context.attempt if context else None}

run_job(body)
"""


def _run_job(tmp_path: Path, what: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FORGEML_JOB")}
    return subprocess.run(
        [PY, "-c", JOB, what], env=base | env, capture_output=True, text=True, check=False
    )


def test_a_result_is_written_by_rename_and_read_back_typed(tmp_path: Path) -> None:
    path = result_path(tmp_path, 3)
    write_result(path, JobResult(outcome=Outcome.SUCCEEDED, outputs={"old": True}))
    first_inode = path.stat().st_ino

    write_result(path, JobResult(outcome=Outcome.FAILED, error_class="X", error="Broke."))

    assert path.name == "result-3.json"
    assert path.stat().st_ino != first_inode  # a new file renamed over, never rewritten
    assert [p.name for p in tmp_path.iterdir()] == ["result-3.json"]  # no temp left
    read = read_result(path)
    assert read == JobResult(outcome=Outcome.FAILED, error_class="X", error="Broke.")


@pytest.mark.parametrize(
    "text", ["", '{"outcome": "SUCC', '{"outcome": "DONE"}', '{"outcome": "FAILED", "x": 1}']
)
def test_a_partial_or_foreign_result_file_reads_as_none(tmp_path: Path, text: str) -> None:
    path = tmp_path / "result-1.json"
    path.write_text(text)

    assert read_result(path) is None


@pytest.mark.parametrize(
    ("error_class", "raised", "code"),
    [
        ("ConfigError", ConfigError, 1),
        ("UsageError", UsageError, 2),
        ("InvalidDataError", InvalidDataError, 1),
        ("KeyError", ForgemlError, 1),
        ("NoSuchClass", ForgemlError, 1),
    ],
)
def test_a_failed_result_raises_its_own_error_class_and_sentence(
    error_class: str, raised: type[ForgemlError], code: int
) -> None:
    result = JobResult(outcome=Outcome.FAILED, error_class=error_class, error="It broke.")

    with pytest.raises(raised, match=r"^It broke\.$") as caught:
        result.raise_error()

    assert type(caught.value) is raised
    assert result.exit_code == caught.value.exit_code == code


def test_the_context_is_read_from_the_environment_once(tmp_path: Path) -> None:
    env = {"FORGEML_JOB_ID": "j1", "FORGEML_JOB_ATTEMPT": "3", "FORGEML_JOB_DIR": str(tmp_path)}
    write_result(result_path(tmp_path, 1), JobResult(outcome=Outcome.PREEMPTED))
    write_result(result_path(tmp_path, 2), JobResult(outcome=Outcome.PREEMPTED, outputs={"a": 2}))

    context = JobContext.from_environ(env)

    assert JobContext.from_environ({}) is None
    assert context is not None
    assert (context.job_id, context.attempt, context.job_dir) == ("j1", 3, tmp_path)
    assert context.result_path == tmp_path / "result-3.json"
    previous = context.previous_result()
    assert previous is not None and previous.outputs == {"a": 2}


@pytest.mark.parametrize(
    ("what", "outcome", "error_class", "error", "code"),
    [
        ("ok", "SUCCEEDED", None, None, 0),
        ("config", "FAILED", "ConfigError", "The real sentence.", 1),
        ("usage", "FAILED", "UsageError", "Give a CONFIG file.", 2),
        ("bug", "FAILED", "KeyError", "KeyError: 'nope'", 1),
        ("stop", "PREEMPTED", None, None, PREEMPTED_EXIT_CODE),
    ],
)
def test_a_job_module_leaves_its_outcome_and_exit_code(
    tmp_path: Path, what: str, outcome: str, error_class: str, error: str, code: int
) -> None:
    env = {"FORGEML_JOB_ID": "j1", "FORGEML_JOB_ATTEMPT": "2", "FORGEML_JOB_DIR": str(tmp_path)}

    done = _run_job(tmp_path, what, **env)

    assert done.returncode == code, done.stderr
    result = read_result(tmp_path / "result-2.json")
    assert result is not None
    assert (result.outcome, result.error_class, result.error) == (outcome, error_class, error)
    if what == "ok":
        assert result.outputs == {"run_id": "r1", "attempt": 2}


def test_a_failing_jobs_error_reaches_the_submitter_without_reading_its_log(
    sched_workspace: Workspace, tmp_path: Path
) -> None:
    fields = {"name": "liar", "command": [PY, "-c", JOB, "config"]}
    fields |= {"resources": {"cpus": 1, "memory_gb": 0.5}}

    job = submit_and_run(sched_workspace, fields, detach=False, wait=False, output=lambda _: None)

    assert job.state == "FAILED"
    log = Path(str(sched_workspace.settings.home.resolve() / "logs" / "jobs" / job.id / "1.log"))
    assert "error: the log's last error line lies" in log.read_text().splitlines()[-1]
    result = job_result(sched_workspace, job)
    assert result is not None
    with pytest.raises(ConfigError, match=r"^The real sentence\.$"):
        result.raise_error()
    with pytest.raises(ForgemlError, match=r"^The real sentence. \(job "):
        raise_for(job)  # `forgeml jobs submit` reads the scheduler's record of it


def test_a_plain_command_leaves_no_result_and_fails_with_its_exit(
    sched_workspace: Workspace,
) -> None:
    code = "import sys; print('error: x'); sys.exit(3)"
    fields = {"name": "plain", "command": [PY, "-c", code]}

    job = submit_and_run(sched_workspace, fields, detach=False, wait=False, output=lambda _: None)

    assert job_result(sched_workspace, job) is None
    with pytest.raises(ForgemlError, match=r"^The job failed: attempt 1 exited with code 3\."):
        raise_for(job)


def test_the_result_file_is_json_a_person_can_read(tmp_path: Path) -> None:
    write_result(
        tmp_path / "r.json", JobResult(outcome=Outcome.SUCCEEDED, outputs={"model": "m@v1"})
    )

    assert json.loads((tmp_path / "r.json").read_text()) == {
        "outcome": "SUCCEEDED",
        "error_class": None,
        "error": None,
        "outputs": {"model": "m@v1"},
    }
