"""`python -m forgeml.pipelines.job SPEC_JSON`: a command or data step as a scheduler job.

A command step's program runs as a child of this job (its output goes to the job's log);
what it made comes back in the job's `JobResult` (`scheduler/contract.py`): the path and
digest of each file it declares as an output. A data step derives or adds a dataset
version, a stream step ingests one window of a stream as one; the output is the version's
reference, digest and row count.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from forgeml.core.artifacts import file_digest
from forgeml.core.errors import CommandFailedError, NotFoundError, StreamError
from forgeml.pipelines.steps import DIGESTS_OUTPUT, CommandStep, DataStep, StreamStep
from forgeml.scheduler.contract import JobContext, run_job, spec_argument

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace


class StepJobSpec(BaseModel):
    """The step's kind and its resolved fields."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    step: dict[str, Any]
    cwd: str | None = None  # a command step's folder (the pipeline file's)


def run_command(step: CommandStep, cwd: Path) -> dict[str, Any]:
    """Run the step's argv in `cwd`; its declared output files, with their digests.

    Raises:
        CommandFailedError: the program exited non-zero (or could not start).
        NotFoundError: it succeeded but did not write a declared output.
    """
    code = _run_forwarding_sigterm(step, cwd)
    if code < 0:
        raise CommandFailedError(
            f"Step '{step.name}' was stopped by {signal.Signals(-code).name}: "
            "its job timed out or was cancelled."
        )
    if code != 0:
        raise CommandFailedError(f"Step '{step.name}' exited with code {code}.")
    outputs: dict[str, Any] = {}
    digests: dict[str, str] = {}
    for name, relative in step.outputs.items():
        path = (cwd / relative).resolve()
        if not path.is_file():
            raise NotFoundError(
                f"Step '{step.name}' did not write its output '{name}' ({relative})."
            )
        outputs[name] = str(path)
        digests[name] = file_digest(path)
    return outputs | {DIGESTS_OUTPUT: digests}


def _run_forwarding_sigterm(step: CommandStep, cwd: Path) -> int:
    """Run the program; a SIGTERM to this job (timeout, cancel) is passed on to it."""
    sys.stdout.flush()
    try:
        process = subprocess.Popen(step.argv, cwd=cwd)
    except OSError as error:
        raise CommandFailedError(f"Step '{step.name}' could not start: {error}.") from None

    def forward(signum: int, _frame: object) -> None:
        process.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        return process.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_data(step: DataStep) -> dict[str, Any]:
    """Derive or add the step's dataset version; its reference, digest and rows."""
    from forgeml.core.workspace import open_workspace
    from forgeml.data import pipeline
    from forgeml.data.ingest import IngestOptions

    workspace = open_workspace()
    try:
        if step.add is not None:
            version = pipeline.add(
                workspace, step.dataset, Path(step.add), IngestOptions(), label=step.label
            ).version
        else:
            assert step.derive is not None  # the model holds exactly one of the two
            derived = pipeline.derive(
                workspace, step.derive, step.dataset, step.params, name=step.into
            )
            version = derived.main.version
        return {"dataset": version.ref, "digest": version.digest, "rows": version.rows}
    finally:
        workspace.close()


def run_stream(step: StreamStep) -> dict[str, Any]:
    """Ingest one window of the step's stream; the new version's reference, digest and
    rows (an empty window: the dataset's latest version's, so the steps after it run on
    what there is).

    Raises:
        StreamError: the broker failed, or the window was empty and there is no version yet.
    """
    from forgeml.core.workspace import open_workspace
    from forgeml.data.streams import StreamOptions, ingest_stream

    options = StreamOptions.model_validate(step.model_dump(include=set(StreamOptions.model_fields)))
    url = _with_password(step)
    workspace = open_workspace()
    try:
        result = ingest_stream(workspace, step.dataset, url, options, on_progress=_progress)
        if result.recorded is None:
            return _latest(workspace, step)
        version = result.recorded.version
        return {"dataset": version.ref, "digest": version.digest, "rows": version.rows}
    finally:
        workspace.close()


def _with_password(step: StreamStep) -> str:
    """The step's URL with the password from its `password_env` variable, if it names one.

    Raises:
        StreamError: the variable is not set in the job's environment.
    """
    from urllib.parse import quote, urlsplit, urlunsplit

    if step.password_env is None:
        return step.url
    password = os.environ.get(step.password_env)
    if password is None:
        raise StreamError(
            f"Step '{step.name}': the environment variable {step.password_env} "
            "(password_env) is not set."
        )
    parts = urlsplit(step.url)
    user, _, host = parts.netloc.rpartition("@")
    netloc = f"{user.split(':', 1)[0]}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def _latest(workspace: Workspace, step: StreamStep) -> dict[str, Any]:
    from forgeml.data import catalog

    with workspace.store.session() as session:
        try:
            version = catalog.resolve(session, step.dataset)
        except NotFoundError:
            raise StreamError(
                f"Step '{step.name}': the window held no new records and dataset "
                f"'{step.dataset}' has no version yet."
            ) from None
        return {"dataset": version.ref, "digest": version.digest, "rows": version.rows}


def _progress(count: int) -> None:
    # one line per received batch in the job's log
    sys.stdout.write(f"received {count} records\n" if count else "subscribed\n")
    sys.stdout.flush()


def _body(_context: JobContext | None) -> dict[str, Any]:
    spec = StepJobSpec.model_validate(spec_argument())
    cwd = Path(spec.cwd) if spec.cwd else Path.cwd()
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "command": lambda: run_command(CommandStep.model_validate(spec.step), cwd),
        "data": lambda: run_data(DataStep.model_validate(spec.step)),
        "stream": lambda: run_stream(StreamStep.model_validate(spec.step)),
    }
    return runners[spec.kind]()


if __name__ == "__main__":
    run_job(_body)
