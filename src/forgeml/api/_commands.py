"""`POST /api/v1/commands`: a CLI command run on the server as a job (the CLI's remote mode
for its heavy commands: train, tune, rag index, pipelines run, ...).

The body is the command line after `forgeml` and the files and folders it names, by their
bare names (a folder as a tar of its plain files), in JSON; it is read as it arrives and
refused (413) once over what the upload limit takes in base64
(`ApiLimits.max_command_body_bytes`), so no larger body is ever held. They are written into
a fresh folder under the workspace (`commands/<id>/`), which is the job's working
directory; each folder is unpacked with `forgeml.core.archives.extract_tar` (no link, no
device, nothing outside it: ClearML CVE-2025-8917), all of them within the upload limits
(bytes and members), and a refused upload leaves no folder behind. The job is `python -m
forgeml.cli *argv`, queued for the server's scheduler, owned and audited as the caller; its
folder is the job's scratch, removed when the job ends (its log is kept with every job's).
Which commands may run this way and the permission each needs besides `jobs:submit` is one
table (`forgeml.client._commands`).

`POST /api/v1/commands/archive` is the same with the files and folders as one tar, the
request body itself, laid out as the job's folder (a file by its name, a folder as a
folder of its files): the body is streamed to a file under the upload limit (413 above it,
nothing left), then unpacked as the job's folder within the same budget. The CLI sends
this way, so a large folder is never whole in memory on either side; the JSON form is
for callers without a tar.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forgeml.api._authz import Authorizer, require
from forgeml.api._context import acting
from forgeml.api._json import CliRouter
from forgeml.api._limits import ApiLimits, receive_body, receive_to_file
from forgeml.client._commands import check_argv, decode_files
from forgeml.core.archives import TAR_MEDIA_TYPE, UnpackBudget, extract_tar
from forgeml.core.errors import PayloadTooLargeError, UsageError
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
    folders: dict[str, str] = Field(
        default_factory=dict,
        description="Folders the command reads, by bare name: a tar of each one's plain "
        "files (no links), in base64.",
    )


# the body is read by the route itself (FastAPI would read a body parameter whole before
# any check), so its schema is declared here
_COMMAND_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": CommandRequest.model_json_schema()}},
    }
}


@router.post(
    "", status_code=202, dependencies=[require("jobs:submit")], openapi_extra=_COMMAND_BODY
)
async def run_command(request: Request) -> dict[str, Any]:
    """Queue `forgeml *argv` as a job in a folder holding `files` and `folders`; answers
    the job's summary (as `jobs submit --detach --json`). 400: not a command run as a job,
    an option a job may not carry, a name with a folder or `..`, or a folder's tar holding
    a link, a device or a member outside it; 403: the command's own permission is missing;
    413: the body is over what the upload limit takes in base64 (refused as it arrives),
    or the files and the folders unpacked are over the upload limit (bytes, or members)."""
    limits: ApiLimits = request.app.state.limits
    raw = await receive_body(request, limits.max_command_body_bytes, "The request body")
    body = _command_request(raw)
    authorizer: Authorizer = request.app.state.authorizer
    await asyncio.to_thread(authorizer.authorize, request, check_argv(body.argv))
    files = decode_files(body.files)
    folders = decode_files(body.folders, "folders")
    clash = sorted(files.keys() & folders.keys())
    if clash:
        raise UsageError(f"folders.{clash[0]}: a file of that name is sent too; rename one.")
    sent = sum(len(data) for data in files.values())
    if sent > limits.max_upload_bytes:
        raise PayloadTooLargeError(
            f"files: over this server's upload limit of {limits.max_upload_bytes:,} bytes."
        )
    # the folders unpack within what the files left of the limit
    budget = UnpackBudget(limits.max_upload_bytes, limits.max_upload_members, "folders", sent)
    return await asyncio.to_thread(_queue, acting(request), body.argv, files, folders, budget)


def _command_request(raw: bytearray) -> CommandRequest:
    """The body as FastAPI would have read it into a `CommandRequest` parameter: the same
    JSON (lone surrogates kept, for `check_argv` to name) and the same 422s."""
    if not raw:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise RequestValidationError([missing])
    try:
        decoded = json.loads(raw)
    except ValueError as error:  # not JSON, or not UTF-8
        position = error.pos if isinstance(error, json.JSONDecodeError) else 0
        invalid = {"type": "json_invalid", "loc": ("body", position), "msg": "JSON decode error"}
        raise RequestValidationError([invalid]) from None
    try:
        return CommandRequest.model_validate(decoded)
    except ValidationError as error:
        errors = error.errors(include_url=False)
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in errors]) from None


def _queue(
    home: Workspace,
    argv: list[str],
    files: dict[str, bytes],
    folders: dict[str, bytes],
    budget: UnpackBudget,
) -> dict[str, Any]:
    folder = command_folder(home)
    try:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        for name, blob in folders.items():
            _unpack(blob, folder / name, budget)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return _submit(home, argv, folder)


_ARCHIVE_BODY = {
    "requestBody": {
        "required": True,
        "description": "The command's files and folders as one tar, laid out as its folder.",
        "content": {TAR_MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.post(
    "/archive",
    status_code=202,
    dependencies=[require("jobs:submit")],
    openapi_extra=_ARCHIVE_BODY,
)
async def run_command_archive(
    request: Request,
    argv: Annotated[
        list[str],
        Query(min_length=1, max_length=256, description="The arguments after `forgeml`."),
    ],
) -> dict[str, Any]:
    """Queue `forgeml *argv` as a job in the folder the body (a tar) unpacks to; answers as
    `POST /api/v1/commands`. 400: as there, or the body is not a tar or holds a name as a
    file and as a folder; 403: the command's own permission is missing; 413: the body, or
    what it unpacks to, is over the upload limit (bytes, or members)."""
    authorizer: Authorizer = request.app.state.authorizer
    await asyncio.to_thread(authorizer.authorize, request, check_argv(argv))
    limits: ApiLimits = request.app.state.limits
    home = acting(request)
    root = await asyncio.to_thread(_commands_root, home)
    # beside the command folders, never inside one: the job's folder is unpacked from it
    handle, name = await asyncio.to_thread(tempfile.mkstemp, ".tar", None, root)
    os.close(handle)
    try:
        await receive_to_file(request, Path(name), limits.max_upload_bytes, "The archive")
        budget = UnpackBudget(limits.max_upload_bytes, limits.max_upload_members, "archive")
        return await asyncio.to_thread(_queue_archive, home, argv, Path(name), budget)
    finally:
        await asyncio.to_thread(os.unlink, name)


def _queue_archive(
    home: Workspace, argv: list[str], archive: Path, budget: UnpackBudget
) -> dict[str, Any]:
    folder = _commands_root(home) / new_id()
    # a refused archive leaves no folder behind (`extract_tar`)
    extract_tar(
        archive,
        folder,
        "The archive",
        "it holds the command's files and folders by their names, each inside its folder",
        budget.filter(),
    )
    return _submit(home, argv, folder)


def _submit(home: Workspace, argv: list[str], folder: Path) -> dict[str, Any]:
    """Queue `forgeml *argv` as a job whose working directory and scratch is `folder`."""
    fields = {
        "name": f"forgeml {' '.join(argv[:2])}",
        "command": cli_command(argv),
        "env": {JOB_CWD_ENV: str(folder)},
        "scratch": str(folder),  # removed when the job ends (`scheduler.jobs.transition`)
    }
    return job_summary(submit_and_run(home, fields, detach=True, wait=False))


def _unpack(blob: bytes, dest: Path, budget: UnpackBudget) -> None:
    # the tar is read from a file beside the command folders, never one of its own names
    handle, name = tempfile.mkstemp(suffix=".tar", dir=dest.parent.parent)
    try:
        with os.fdopen(handle, "wb") as tar:
            tar.write(blob)
        extract_tar(
            Path(name),
            dest,
            f"folders.{dest.name}",
            "a folder is sent as its plain files, each inside it",
            budget.filter(),
        )
    finally:
        os.unlink(name)


def command_folder(home: Workspace) -> Path:
    """A fresh folder for one command job's files, under the workspace."""
    folder = _commands_root(home) / new_id()
    folder.mkdir()
    return folder


def _commands_root(home: Workspace) -> Path:
    root = home.settings.home.resolve() / "commands"
    root.mkdir(parents=True, exist_ok=True)
    return root
