"""The job contract: what a job reads from its environment and the one result it leaves.

Every forgeml job (train, tune, optimize, and whatever comes next) is a module of its own
domain run as `python -m MODULE SPEC_JSON`. The scheduler starts it with the environment
named here; the job reads its `JobContext` once (`JobContext.from_environ`), does its work,
and writes one `JobResult` atomically (temp + rename) to `JobContext.result_path`: the
outcome, the error's class and sentence, and its outputs (run id, model version, ...).
The command that submitted the job, and the scheduler, read that file; nothing parses the
job's log to learn how it ended.

Exit codes still tell the scheduler how to move the job on (`_outcome.py`): 0 succeeded,
`PREEMPTED_EXIT_CODE` stopped on request (requeue), 2 a usage error, 1 any other failure.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field

from forgeml.core import errors
from forgeml.core.atomic import atomic_write_text

# ---- names shared by the scheduler and every job (set by `_records.job_environment`)
JOB_ID_ENV = "FORGEML_JOB_ID"
JOB_ATTEMPT_ENV = "FORGEML_JOB_ATTEMPT"
JOB_DIR_ENV = "FORGEML_JOB_DIR"
JOB_CWD_ENV = "FORGEML_JOB_CWD"  # the submitter's directory: relative paths keep their meaning
JOB_PROJECT_ENV = "FORGEML_PROJECT"  # the project the job was submitted in (Settings.project)
# the job's scratch folder (`JobSpec.scratch`: the files a command job was sent with), set
# by the scheduler; it is removed when the job ends, so what must outlive it is copied out
JOB_SCRATCH_ENV = "FORGEML_JOB_SCRATCH"
RESULT_FILE = "result-{attempt}.json"  # in the job's folder, one per attempt
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM: the job stopped on request, checkpoint written
FAILED_EXIT_CODE = 1
# `python -m forgeml.cli ARGS`: forgeml's own CLI run as a job (the control plane's
# `POST /api/v1/commands`); it finds its workspace and tracking from FORGEML_HOME
CLI_MODULE = "forgeml.cli"


def cli_command(argv: Sequence[str]) -> list[str]:
    """The job command that runs `forgeml *argv` with this Python."""
    return [sys.executable, "-m", CLI_MODULE, *argv]


def runs_cli(command: Sequence[str]) -> bool:
    """Whether the job `command` is forgeml's CLI (`cli_command`)."""
    return list(command[1:3]) == ["-m", CLI_MODULE]


class Outcome(StrEnum):
    """How a job's attempt ended, as the job itself saw it."""

    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    PREEMPTED = "PREEMPTED"  # stopped by SIGTERM (preemption, cancel); resumable


class JobResult(BaseModel):
    """The one file a job attempt leaves: its outcome, its error, its outputs."""

    model_config = ConfigDict(extra="forbid")

    outcome: Outcome
    error_class: str | None = Field(
        default=None, description="Name of the forgeml.core.errors class (or Python's)."
    )
    error: str | None = Field(default=None, description="The error's one sentence.")
    outputs: dict[str, Any] = Field(
        default_factory=dict, description="What the job made: run id, model version, ..."
    )

    @property
    def exit_code(self) -> int:
        """The process exit code that goes with this result."""
        if self.outcome == Outcome.SUCCEEDED:
            return 0
        if self.outcome == Outcome.PREEMPTED:
            return PREEMPTED_EXIT_CODE
        return _error_type(self.error_class).exit_code

    def raise_error(self) -> None:
        """Raise the job's own error again (its forgeml class, exit code and sentence)."""
        if self.outcome == Outcome.FAILED:
            raise _error_type(self.error_class)(self.error or "The job failed.")


def _error_type(name: str | None) -> type[errors.ForgemlError]:
    found = getattr(errors, name or "", None)
    is_forgeml = isinstance(found, type) and issubclass(found, errors.ForgemlError)
    return found if is_forgeml else errors.ForgemlError  # type: ignore[return-value]


def result_path(job_dir: Path, attempt: int) -> Path:
    """Where attempt `attempt` of the job in `job_dir` writes its `JobResult`."""
    return Path(job_dir) / RESULT_FILE.format(attempt=attempt)


def write_result(path: Path, result: JobResult) -> None:
    """Write `result` atomically: a reader sees the whole file or none."""
    atomic_write_text(path, result.model_dump_json())


def read_result(path: Path) -> JobResult | None:
    """The result at `path`, or None when the attempt left none (or an unreadable one)."""
    try:
        return JobResult.model_validate_json(Path(path).read_text())
    except (OSError, ValueError):
        return None


class JobContext(BaseModel):
    """Who this job is, read from the environment once."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    attempt: int = 1
    job_dir: Path
    cwd: Path | None = None
    scratch: Path | None = None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> JobContext | None:
        """The context the scheduler set, or None outside a job."""
        env = os.environ if environ is None else environ
        if not env.get(JOB_ID_ENV):
            return None
        job_dir = env.get(JOB_DIR_ENV) or str(Path.cwd() / ".forgeml-job")
        return cls(
            job_id=env[JOB_ID_ENV],
            attempt=int(env.get(JOB_ATTEMPT_ENV) or 1),
            job_dir=Path(job_dir),
            cwd=Path(env[JOB_CWD_ENV]) if env.get(JOB_CWD_ENV) else None,
            scratch=Path(env[JOB_SCRATCH_ENV]) if env.get(JOB_SCRATCH_ENV) else None,
        )

    @property
    def result_path(self) -> Path:
        return result_path(self.job_dir, self.attempt)

    def previous_result(self) -> JobResult | None:
        """The result of the latest earlier attempt that left one (to resume from it)."""
        for attempt in range(self.attempt - 1, 0, -1):
            result = read_result(result_path(self.job_dir, attempt))
            if result is not None:
                return result
        return None


class JobPreempted(BaseException):
    """A job body stopped on request with its work saved; `outputs` say where."""

    def __init__(self, outputs: dict[str, Any]) -> None:
        super().__init__("preempted")
        self.outputs = outputs


def result_of(body: Callable[[], dict[str, Any]]) -> JobResult:
    """Run `body`; its outputs, or the error it raised, as a `JobResult`.

    A ForgemlError is a sentence for the user; any other exception is a bug, so its
    traceback goes to the log (stderr) and its class and message to the result.
    """
    try:
        return JobResult(outcome=Outcome.SUCCEEDED, outputs=body())
    except JobPreempted as stop:
        return JobResult(outcome=Outcome.PREEMPTED, outputs=stop.outputs)
    except errors.ForgemlError as error:
        return JobResult(outcome=Outcome.FAILED, error_class=type(error).__name__, error=str(error))
    except Exception as error:
        traceback.print_exc()
        sentence = f"{type(error).__name__}: {error}".rstrip(": ")
        return JobResult(outcome=Outcome.FAILED, error_class=type(error).__name__, error=sentence)


def run_job(body: Callable[[JobContext | None], dict[str, Any]]) -> NoReturn:
    """A job module's `main`: run `body` in this job's context, write the result, exit.

    Args:
        body: the job's work; returns its outputs, raises `JobPreempted` when it stopped
            on request, or a ForgemlError for the user.
    """
    context = JobContext.from_environ()
    result = result_of(lambda: body(context))
    if context is not None:
        write_result(context.result_path, result)
    if result.error:
        # for a person reading the log; the submitter reads the result file, not this
        sys.stderr.write(f"job failed: {result.error_class}: {result.error}\n")
        sys.stderr.flush()
    sys.stdout.flush()
    sys.exit(result.exit_code)


def spec_argument(argv: list[str] | None = None) -> dict[str, Any]:
    """The job's spec: the JSON object that is its one command-line argument."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise errors.UsageError("A job module takes one argument: its spec as JSON.")
    spec = json.loads(args[0])
    if not isinstance(spec, dict):
        raise errors.UsageError("A job's spec is a JSON object.")
    return spec
