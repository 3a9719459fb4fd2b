"""`forgeml jobs submit|list|show|logs|cancel|retry|export`."""

from __future__ import annotations

import sys
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import remote_client, source
from forgeml.sdk.local import LocalJobs

if TYPE_CHECKING:
    from forgeml.core.store import JobRecord
    from forgeml.core.workspace import Workspace

app = typer.Typer(
    help="Jobs: submit any command, follow it, cancel or retry it.", no_args_is_help=True
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
JobArg = Annotated[str, typer.Argument(help="Job id, id prefix, or name (latest).")]


def _workspace() -> Workspace:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


def _jobs() -> Any:
    return source(lambda client: client.jobs, LocalJobs)


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


@app.command(
    "submit", context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True}
)
def submit_command(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
    cpus: Annotated[float, typer.Option(help="CPU cores per worker.")] = 1.0,
    gpus: Annotated[int, typer.Option(help="GPUs per worker.")] = 0,
    memory: Annotated[float, typer.Option(help="Memory per worker, in GB.")] = 1.0,
    workers: Annotated[int, typer.Option(help="Processes started together (gang).")] = 1,
    queue: Annotated[str, typer.Option(help="The queue to wait in.")] = "default",
    priority: Annotated[str, typer.Option(help="low, normal, high or critical.")] = "normal",
    max_retries: Annotated[int, typer.Option(help="Retries after a failed attempt.")] = 0,
    backoff: Annotated[float, typer.Option(help="First retry delay (s); doubles.")] = 5.0,
    timeout: Annotated[float | None, typer.Option(help="Wall-time limit (s).")] = None,
    name: Annotated[str | None, typer.Option(help="Job name (default: the program).")] = None,
    env: Annotated[list[str] | None, typer.Option(help="Extra environment KEY=VALUE.")] = None,
    detach: Annotated[bool, typer.Option(help="Queue it for the server; return at once.")] = False,
    wait: Annotated[
        bool, typer.Option(help="With a server: stream its log until it ends.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run any command as a job: `forgeml jobs submit --cpus 2 -- python train.py`."""
    fields = {
        "name": name or Path(command[0]).name,
        "command": command,
        "resources": {"cpus": cpus, "gpus": gpus, "memory_gb": memory},
        "workers": workers,
        "queue": queue,
        "priority": priority,
        "max_retries": max_retries,
        "backoff_seconds": backoff,
        "timeout_seconds": timeout,
        "env": _parse_env(env or []),
    }
    client = remote_client()
    if client is not None:
        _submit_remote(client, fields, detach, as_json)
        return
    from forgeml.scheduler.submit import raise_for, submit_and_run

    output = (lambda _: None) if as_json else _write
    with closing(_workspace()) as workspace:
        job = submit_and_run(workspace, fields, detach=detach, wait=wait, output=output)
    if as_json:
        print_json(_summary(job))
    elif job.state == "PENDING":
        say(
            f"job {job.id} queued in '{job.queue}'; "
            f"follow it with `forgeml jobs logs -f {job.id[:12]}`"
        )
    raise_for(job)


def _submit_remote(client: Any, fields: dict[str, Any], detach: bool, as_json: bool) -> None:
    """Queue the job on the server; unless `detach`, stream its log until it ends (as
    `--wait` does: the server's scheduler runs it, not this machine)."""
    from forgeml.core.errors import ForgemlError

    summary = client.jobs.submit(**fields)
    job_id = summary["job_id"]
    if detach:
        if as_json:
            print_json(summary)
        else:
            say(f"job {job_id} queued in '{summary['queue']}'; "
                f"follow it with `forgeml jobs logs -f {job_id[:12]}`")  # fmt: skip
        return
    ended = client.jobs.follow(job_id, (lambda _: None) if as_json else _write)
    detail = client.jobs.show(job_id)
    final = {key: detail[key] for key in summary} | {"attempts": ended["attempts"]}
    if as_json:
        print_json(final)
    if final["state"] in ("FAILED", "CANCELLED"):
        first_line = (final["error"] or f"Job {job_id} ended {final['state']}.").splitlines()[0]
        raise ForgemlError(f"{first_line} (job {job_id}; `forgeml jobs show {job_id[:12]}`)")


def _parse_env(pairs: list[str]) -> dict[str, str]:
    from forgeml.core.errors import UsageError

    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"Invalid --env '{pair}': use KEY=VALUE.")
        env[key] = value
    return env


def _summary(job: JobRecord) -> dict[str, Any]:
    from forgeml.scheduler.jobs import job_summary

    return job_summary(job)


@app.command("list")
def list_(
    state: Annotated[list[str] | None, typer.Option(help="Only jobs in this state.")] = None,
    queue: Annotated[str | None, typer.Option(help="Only jobs of this queue.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (newest first).")] = 100,
    as_json: JsonFlag = False,
) -> None:
    """List jobs, newest first."""
    from forgeml.core.errors import UsageError
    from forgeml.scheduler.model import JobState

    states = [s.upper() for s in state or []]
    unknown = [s for s in states if s not in JobState.__members__]
    if unknown:  # checked here, so the local store and the API refuse it alike
        known = ", ".join(JobState.__members__).lower()
        raise UsageError(f"--state: unknown state '{unknown[0].lower()}' (one of {known}).")
    jobs = _jobs().list(states, queue, limit)
    if as_json:
        print_json(jobs)
        return
    rows = [
        (
            j["job_id"][:12],
            j["name"],
            j["state"],
            j["queue"],
            j["priority"],
            j["attempts"],
            when(j["submitted_at"]),
        )
        for j in jobs
    ]
    print_table(
        "jobs", ["job", "name", "state", "queue", "priority", "attempts", "submitted"], rows
    )


@app.command("show")
def show(job: JobArg, as_json: JsonFlag = False) -> None:
    """A job's state, attempts (usage and cost), events and, if it failed, its log tail."""
    detail = _jobs().show(job)
    if as_json:
        print_json(detail)
        return
    say(f"[bold]{detail['name']}[/bold] job {detail['job_id']}: {detail['state']} "
        f"(queue {detail['queue']})")  # fmt: skip
    say(f"command: {' '.join(detail['command'])}")
    print_table(
        "attempts",
        ["#", "state", "exit", "reason", "wall s", "cpu s", "peak GB", "cost"],
        [
            (a["number"], a["state"], a["exit_code"], a["reason"], f"{a['wall_seconds']:.1f}",
             f"{a['cpu_seconds']:.1f}", f"{a['peak_memory_gb']:.2f}", f"{a['cost']:.4f}")
            for a in detail["attempts"]
        ],
    )  # fmt: skip
    print_table(
        "events",
        ["at", "attempt", "from", "to", "reason"],
        [(when(e["at"]), e["attempt"], e["from"], e["to"], e["reason"]) for e in detail["events"]],
    )
    if detail["error"]:
        say(detail["error"])


@app.command("logs")
def logs(
    job: JobArg,
    attempt: Annotated[int | None, typer.Option(help="Attempt number (default: the last).")] = None,
    follow_: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep streaming until it ends.")
    ] = False,
) -> None:
    """Print an attempt's log (from the artifact store once it has ended)."""
    if follow_:
        _jobs().follow(job, _write)
        return
    _write(_jobs().log(job, attempt))


@app.command("cancel")
def cancel_command(job: JobArg, as_json: JsonFlag = False) -> None:
    """Cancel a job: at once when it waits; a running one gets SIGTERM from the scheduler."""
    summary = _jobs().cancel(job)
    if as_json:
        print_json(summary)
        return
    done = summary["state"] == "CANCELLED"
    say(f"job {summary['job_id']} " + ("cancelled" if done else "will be stopped and cancelled"))


@app.command("retry")
def retry_command(job: JobArg, as_json: JsonFlag = False) -> None:
    """Queue a FAILED or CANCELLED job again (a server, or `--detach`ed runs, pick it up)."""
    summary = _jobs().retry(job)
    if as_json:
        print_json(summary)
        return
    say(f"job {summary['job_id']} queued again")


@app.command("export")
def export(
    job: JobArg,
    format_: Annotated[str, typer.Option("--format", help="Only 'volcano' for now.")] = "volcano",
    image: Annotated[
        str, typer.Option(help="Container image with forgeml installed.")
    ] = "forgeml:latest",
    namespace: Annotated[str, typer.Option(help="Kubernetes namespace.")] = "default",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here, not stdout.")
    ] = None,
    submit: Annotated[bool, typer.Option(help="Create it on the cluster (kubeconfig).")] = False,
    kubeconfig: Annotated[str | None, typer.Option(help="Kubeconfig file.")] = None,
) -> None:
    """Write a Volcano `batch.volcano.sh/v1alpha1` Job (and its Queue) for the job."""
    import yaml

    from forgeml.core.errors import UsageError
    from forgeml.scheduler.executors.kubernetes import submit_manifest
    from forgeml.scheduler.export import EXPORT_FORMATS, volcano_export

    if format_ not in EXPORT_FORMATS:
        raise UsageError(f"Unknown --format '{format_}': only 'volcano' is supported.")
    client = remote_client()
    if submit and client is not None:
        raise UsageError(
            "--submit cannot run in remote mode: it creates the job with this machine's "
            "kubeconfig; write the manifest with --output and `kubectl apply -f` it, or run "
            "it beside the server."
        )
    if client is not None:
        text = client.jobs.export(job, format_, image, namespace)
    else:
        with closing(_workspace()) as workspace:
            text = volcano_export(workspace, job, image, namespace)
    if output is not None:
        output.write_text(text)
    if submit:
        for document in yaml.safe_load_all(text):
            say(f"created {submit_manifest(document, namespace, kubeconfig)}")
    elif output is None:
        sys.stdout.write(text)
