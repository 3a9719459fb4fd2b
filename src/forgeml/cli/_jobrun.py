"""`forgeml train|finetune|tune` as scheduler jobs.

Outside a job, the command records a job that runs the same command (with its config path
made absolute) and runs it in the foreground through the local executor, or queues it for
the server (`--detach`). Inside a job (`FORGEML_JOB_ID` is set) the command trains directly:
it resumes the run a preempted earlier attempt left in `FORGEML_JOB_DIR/run_id`, writes
the summary to `FORGEML_JOB_DIR/summary.json` for the submitting command, and exits with
`PREEMPTED_EXIT_CODE` when it stopped for a preemption, so the scheduler requeues it.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.cli._output import print_json, print_table, say

if TYPE_CHECKING:
    from forgeml.core.store import JobRecord

RUN_ID_FILE = "run_id"
DEFAULT_MEMORY_GB = 4.0
SUMMARY_FILE = "summary.json"
# set by the submitting command, which prints the summary itself from SUMMARY_FILE
QUIET_ENV = "FORGEML_JOB_QUIET_SUMMARY"


@dataclass(frozen=True)
class JobOptions:
    """How the training job is scheduled."""

    detach: bool = False
    wait: bool = False
    queue: str = "default"
    priority: str = "normal"
    cpus: float = 1.0
    memory_gb: float | None = None  # default: DEFAULT_MEMORY_GB, or all there is when less
    gpus: int | None = None  # default: one per worker when this machine has enough


def summary_is_printed_by_submitter() -> bool:
    """Inside a job that `forgeml train` submitted: it prints the summary, not the job."""
    return in_job() and os.environ.get(QUIET_ENV) == "1"


def in_job() -> bool:
    """True inside a scheduler job: train directly."""
    return bool(os.environ.get("FORGEML_JOB_ID"))


def _job_dir() -> Path | None:
    folder = os.environ.get("FORGEML_JOB_DIR")
    return Path(folder) if folder else None


def resume_for_job(resume: str | None) -> str | None:
    """The run a preempted earlier attempt of this job left behind, unless one is given."""
    folder = _job_dir()
    if resume is not None or folder is None or not (folder / RUN_ID_FILE).exists():
        return resume
    return (folder / RUN_ID_FILE).read_text().strip() or None


def record_outcome(payload: dict[str, Any], preempted: bool) -> None:
    """Inside a job: leave the summary and the run id; exit 143 when preempted."""
    from forgeml.scheduler.jobs import PREEMPTED_EXIT_CODE

    folder = _job_dir()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / RUN_ID_FILE, str(payload["run_id"]))
    write_summary(payload)
    if preempted:  # SystemExit: click returns typer.Exit's code instead of exiting with it
        raise SystemExit(PREEMPTED_EXIT_CODE)


def write_summary(payload: dict[str, Any]) -> None:
    """Inside a job: the command's JSON summary, for the command that submitted it."""
    folder = _job_dir()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / SUMMARY_FILE, json.dumps(payload, default=str))


def _atomic_write(path: Path, text: str) -> None:
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


def submit_training(
    kind: str,
    args: list[str],
    *,
    name: str,
    workers: int,
    as_json: bool,
    options: JobOptions,
) -> None:
    """Run `forgeml KIND ARGS` as a job; print what the job printed (or its JSON summary)."""
    job, summary = run_training_job(kind, args, name=name, workers=workers, options=options)
    if job.state == "PENDING" or not job.state:
        if as_json:
            print_json({"job_id": job.id, "state": job.state})
        else:
            say(f"job {job.id} queued for the server; `forgeml jobs logs -f {job.id[:12]}`")
        return
    summary = summary or {"job_id": job.id, "state": job.state}
    if as_json:
        print_json(summary)
    else:
        print_run_summary(summary)


def run_training_job(
    kind: str, args: list[str], *, name: str, workers: int, options: JobOptions
) -> tuple[JobRecord, dict[str, Any] | None]:
    """Record `forgeml KIND ARGS` as a job and run it (or queue it with `options.detach`).

    Returns:
        The job as it ended (PENDING when queued) and the summary it left, if any.

    Raises:
        ForgemlError: the job did not succeed; its own error sentence when it printed one.
    """
    from forgeml.cli.jobs import submit_and_run
    from forgeml.core.workspace import open_workspace

    workspace = open_workspace()
    memory, gpus = options.memory_gb, options.gpus
    if memory is None or gpus is None:
        from forgeml.scheduler.cluster import local_capacity

        # training uses CUDA when it sees it, as it did before it ran as a job
        capacity = local_capacity(workspace.settings)
        if memory is None:
            memory = min(DEFAULT_MEMORY_GB, capacity.memory_gb / workers)
        if gpus is None:
            gpus = 1 if capacity.gpus >= workers else 0
    fields = {
        "name": name,
        "kind": kind,
        "command": [sys.executable, "-m", "forgeml.cli", kind, *args],
        "resources": {"cpus": options.cpus, "gpus": gpus, "memory_gb": memory},
        "workers": workers,
        "queue": options.queue,
        "priority": options.priority,
        # relative paths in the config mean what they meant here
        "env": {"FORGEML_JOB_CWD": os.getcwd(), QUIET_ENV: "1"},
    }
    # the job's log is progress, on stderr; stdout keeps the summary (or JSON) alone
    job = submit_and_run(
        workspace, fields, detach=options.detach, wait=options.wait, model_name=name, output=_log
    )
    if job.state == "PENDING" or not job.state:
        return job, None
    if job.state != "SUCCEEDED":
        raise_job_error(workspace, job)
    return job, _job_summary(workspace, job)


def _log(data: bytes) -> None:
    # the terminal's stderr itself, as the training processes' own output always went
    os.write(2, data)


def _job_summary(workspace: Any, job: JobRecord) -> dict[str, Any] | None:
    from forgeml.scheduler.service import job_dir

    path = job_dir(workspace, job.id) / SUMMARY_FILE
    return dict(json.loads(path.read_text())) if path.exists() else None


def raise_job_error(workspace: Any, job: JobRecord) -> None:
    """The job's own one-sentence error (exit 2 for a usage error), else the job's."""
    from forgeml.core.errors import ForgemlError, UsageError
    from forgeml.scheduler.jobs import attempts_of

    with workspace.store.session() as session:
        attempts = attempts_of(session, job.id)
    last = attempts[-1] if attempts else None
    text = ""
    if last is not None and last.log_digest:
        text = workspace.artifacts.get_bytes(last.log_digest).decode(errors="replace")
    errors = [line[len("error: ") :] for line in text.splitlines() if line.startswith("error: ")]
    if errors:
        error_class = UsageError if last is not None and last.exit_code == 2 else ForgemlError
        raise error_class(errors[-1])
    first_line = (job.error or f"Job {job.id} ended {job.state}.").splitlines()[0]
    raise ForgemlError(f"{first_line} (job {job.id}; `forgeml jobs show {job.id[:12]}`)")


def print_run_summary(payload: dict[str, Any]) -> None:
    """The run's summary for a person."""
    if "run_id" not in payload:  # a study's summary, or a job that left none
        print_study_summary(payload)
        return
    say(f"run {payload['run_id']}: {payload['status']} after {payload['steps']} steps")
    rows = [
        (k, f"{v:.4f}")
        for k, v in payload["metrics"].items()
        if isinstance(v, int | float) and "/" not in k  # per-slice metrics: see --json
    ]
    print_table(
        "final metrics (per-slice metrics: runs show RUN --json)", ["metric", "value"], rows
    )
    if payload["status"] == "PREEMPTED":
        say(f"preempted: resume with `forgeml train --resume {payload['run_id']}`")
    if payload["model"]:
        say(f"registered model {payload['model']}")


def print_study_summary(result: dict[str, Any]) -> None:
    """A study's summary for a person."""
    if "study" not in result:
        print_table("summary", ["key", "value"], [(k, str(v)) for k, v in result.items()])
        return
    say(f"study {result['study']}: best {result['metric']} = {result['best_value']:.4f}")
    print_table("best parameters", ["key", "value"], list(result["best_params"].items()))
    say(
        f"best trial run {result['best_run']}"
        + (f" registered as {result['model']}" if result.get("model") else "")
    )
