"""`POST /api/v1/commands`: a CLI command run on the server as a job (the CLI's remote mode
for its heavy commands: train, tune, rag index, pipelines run, ...).

The body is the command line after `forgeml` and the files it names, by their bare names.
The files are written into a fresh folder under the workspace (`commands/<id>/`), which is
the job's working directory; the job is `python -m forgeml.cli *argv`, queued for the
server's scheduler, owned and audited as the caller. Which commands may run this way and
the permission each needs besides `jobs:submit` is one table (`forgeml.client._commands`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from forgeml.api._authz import Authorizer, require
from forgeml.api._context import acting
from forgeml.api._json import CliRouter
from forgeml.api._limits import ApiLimits
from forgeml.client._commands import check_argv, decode_files
from forgeml.core.errors import PayloadTooLargeError
from forgeml.core.ids import new_id
from forgeml.core.workspace import Workspace
from forgeml.scheduler.contract import JOB_CWD_ENV, cli_command
from forgeml.scheduler.jobs import job_summary
from forgeml.scheduler.submit import submit_and_run

router = CliRouter(prefix="/api/v1/commands")


class CommandRequest(BaseModel):
    """A `forgeml` command line to run as a job, with the files it names."""

    model_config = ConfigDict(extra="forbid")

    argv: list[str] = Field(
        min_length=1, max_length=256, description="The arguments after `forgeml`."
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="Files the command reads, by bare name: their content in base64.",
    )


@router.post("", status_code=202, dependencies=[require("jobs:submit")])
async def run_command(request: Request, body: CommandRequest) -> dict[str, Any]:
    """Queue `forgeml *argv` as a job in a folder holding `files`; answers the job's
    summary (as `jobs submit --detach --json`). 400: not a command run as a job, an option
    a job may not carry, or a file name with a folder or `..`; 403: the command's own
    permission is missing; 413: the files are over the upload limit."""
    authorizer: Authorizer = request.app.state.authorizer
    await asyncio.to_thread(authorizer.authorize, request, check_argv(body.argv))
    limits: ApiLimits = request.app.state.limits
    files = decode_files(body.files)
    if sum(len(data) for data in files.values()) > limits.max_upload_bytes:
        raise PayloadTooLargeError(
            f"files: over this server's upload limit of {limits.max_upload_bytes:,} bytes."
        )
    return await asyncio.to_thread(_queue, acting(request), body.argv, files)


def _queue(home: Workspace, argv: list[str], files: dict[str, bytes]) -> dict[str, Any]:
    folder = command_folder(home)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    fields = {
        "name": f"forgeml {' '.join(argv[:2])}",
        "command": cli_command(argv),
        "env": {JOB_CWD_ENV: str(folder)},
    }
    return job_summary(submit_and_run(home, fields, detach=True, wait=False))


def command_folder(home: Workspace) -> Path:
    """A fresh folder for one command job's files, under the workspace."""
    folder = home.settings.home.resolve() / "commands" / new_id()
    folder.mkdir(parents=True)
    return folder
