"""The CLI commands the control plane runs as jobs (`POST /api/v1/commands`), the permission
each needs, and the rules their uploaded files and folders follow: one table, read by the server to
authorize a command and by the CLI's remote mode to send one.

Kept free of HTTP imports: the CLI reads the table on every start in remote mode.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    from forgeml.client._transport import Transport

# (group, command) -> the permission a caller needs to run it as a job, besides jobs:submit;
# (group, None): the group is the command (`forgeml train CONFIG`, `forgeml deploy MODEL_REF`)
JOB_COMMANDS: dict[tuple[str, str | None], str] = {
    ("train", None): "jobs:submit",
    ("finetune", None): "jobs:submit",
    ("tune", None): "jobs:submit",
    ("optimize", None): "jobs:submit",
    ("prompts", "eval"): "prompts:write",
    ("rag", "index"): "rag:write",
    ("rag", "rebuild"): "rag:write",
    ("rag", "eval"): "rag:read",
    ("rag", "answer"): "rag:read",
    ("pipelines", "run"): "pipelines:run",
    ("pipelines", "graph"): "pipelines:read",
    ("pipelines", "trigger"): "pipelines:write",  # `pipelines trigger add|list|remove|firings`
    ("models", "compare"): "models:read",
    ("models", "import"): "models:write",
    ("monitor", "drift"): "deployments:read",
    ("monitor", "online"): "deployments:read",
    ("monitor", "accuracy"): "deployments:read",
    ("monitor", "feedback"): "models:write",
    # policies release models and drive retraining: a maintainer's
    ("monitor", "policy"): "deployments:write",
    ("data", "crawl"): "datasets:write",
    ("data", "ingest-stream"): "datasets:write",
    ("deploy", None): "deployments:write",
    ("deploy", "create"): "deployments:write",
    ("deploy", "rollback"): "deployments:write",
    ("deploy", "check"): "deployments:read",
}
# options a command job may not carry: the job runs on the server as the server's CLI, and
# the server's own network is not the caller's to reach (forgeml's netguard stays on)
REFUSED_OPTIONS = ("--server", "--token", "--allow-private")
MAX_NAME_BYTES = 255  # a file name on every file system the server may write to


def job_command(argv: Sequence[str]) -> tuple[str, str | None] | None:
    """The `JOB_COMMANDS` key of `forgeml *argv`, or None when it is not run as a job."""
    if not argv:
        return None
    command = argv[1] if len(argv) > 1 else None
    if (argv[0], command) in JOB_COMMANDS:
        return argv[0], command
    if (argv[0], None) in JOB_COMMANDS:
        return argv[0], None
    return None


def check_argv(argv: Sequence[str]) -> str:
    """The permission `forgeml *argv` needs as a job.

    Raises:
        UsageError: it is not a command the server runs as a job, or it carries an option
            a job may not (`REFUSED_OPTIONS`).
    """
    key = job_command(argv)
    if key is None:
        shown = " ".join(argv[:2]) or "(nothing)"
        raise UsageError(
            f"argv: `forgeml {shown}` is not a command the server runs as a job "
            f"(one of: {', '.join(sorted({group for group, _ in JOB_COMMANDS}))} commands "
            "listed in forgeml.client._commands)."
        )
    for arg in argv:
        _check_text(arg, "argv")
        if "\0" in arg:
            raise UsageError("argv: an argument may not hold a NUL character.")
        flag = arg.split("=", 1)[0]
        if flag in REFUSED_OPTIONS:
            raise UsageError(f"argv: {flag} cannot be given to a command the server runs as a job.")
    return JOB_COMMANDS[key]


def _check_text(text: str, field: str) -> None:
    # a lone surrogate (JSON's "\\ud800") reaches no file system, database or process
    try:
        text.encode()
    except UnicodeEncodeError:
        raise UsageError(f"{field}: not valid Unicode text.") from None


def check_file_name(name: str, field: str = "files") -> str:
    """`name` if it is a bare file name (no folder, no `..`); `field` names the body's
    field in an error (`files`, or `folders` for a folder's name).

    Raises:
        UsageError: it is empty, names a folder, or holds `..` or a NUL.
    """
    _check_text(name, field)
    if not name or name in (".", "..") or ".." in name or "/" in name or "\\" in name:
        raise UsageError(
            f"{field}.{name}: a {_noun(field)} is sent by its bare name, without a folder or '..'."
        )
    if "\0" in name or len(name.encode()) > MAX_NAME_BYTES:
        raise UsageError(
            f"{field}: a {_noun(field)} name is at most {MAX_NAME_BYTES} bytes, without a "
            "NUL character."
        )
    return name


def _noun(field: str) -> str:
    return "folder" if field == "folders" else "file"


def decode_files(files: Mapping[str, str], field: str = "files") -> dict[str, bytes]:
    """The uploaded files' (or, with `field="folders"`, the folders' tar) contents, each
    name checked (`check_file_name`).

    Raises:
        UsageError: a name is not a bare file name, or a content is not base64.
    """
    decoded = {}
    for name, content in files.items():
        check_file_name(name, field)
        try:
            decoded[name] = base64.b64decode(content, validate=True)
        except ValueError:
            raise UsageError(f"{field}.{name}: the content is not base64.") from None
    return decoded


class Commands:
    """CLI commands run as server jobs (`/api/v1/commands`)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def run(
        self,
        argv: Sequence[str],
        files: Mapping[str, bytes],
        folders: Mapping[str, bytes] | None = None,
    ) -> dict[str, Any]:
        """Queue `forgeml *argv` as a job whose folder holds `files`, and `folders` unpacked
        (each a tar of plain files, `forgeml.core.archives.pack_files`); answers the job's
        summary (as `jobs submit --json`). The contents travel in memory, in JSON: for
        large ones, `run_archive`."""
        body: dict[str, Any] = {"argv": list(argv), "files": _encoded(files)}
        if folders:
            body["folders"] = _encoded(folders)
        return self._transport.post("/commands", body)

    def run_archive(self, argv: Sequence[str], archive: IO[bytes]) -> dict[str, Any]:
        """Queue `forgeml *argv` as a job whose folder is the tar `archive` unpacked (an
        open binary file at its start, `forgeml.core.archives.pack_named`), streamed from
        the file a block at a time; answers as `run`."""
        from forgeml.core.archives import TAR_MEDIA_TYPE

        return self._transport.upload(
            "/commands/archive", archive, TAR_MEDIA_TYPE, params={"argv": list(argv)}
        )


def _encoded(contents: Mapping[str, bytes]) -> dict[str, str]:
    return {name: base64.b64encode(data).decode() for name, data in contents.items()}
