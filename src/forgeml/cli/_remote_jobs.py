"""Remote mode of the heavy commands (train, tune, rag index, pipelines run, ...): each runs
on the server as a job of its own CLI (`POST /api/v1/commands`).

The local files the command line names (an argument, or the value of `--opt=value`, that
is an existing file) are uploaded with it and the arguments rewritten to their bare names:
the job runs in a folder holding them. A folder is refused (send its files), and so are
two different files of one name. Then the job's log is followed, as `jobs logs -f` does,
onto stdout (the job's stdout and stderr, in order), and the command exits as the job did:
0 when it succeeded, else its exit code (1 when it has none) with one sentence naming it.
`--detach` prints the job's summary (`jobs submit --detach`) and returns.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.cli._output import print_json, say
from forgeml.core.errors import ForgemlError, UsageError

if TYPE_CHECKING:
    from forgeml.client import Client

DETACH = "--detach"


def run_as_job(client: Client, args: list[str]) -> int:
    """Run `forgeml *args` on the server as a job; its exit code (0) or raise its failure.

    Raises:
        UsageError: a named path is a folder, or two files share a name.
        ForgemlError: the job did not succeed (its exit code, or 1).
    """
    options = _options_end(args)
    detach = DETACH in args[:options]
    argv = [arg for i, arg in enumerate(args) if not (arg == DETACH and i < options)]
    argv, files = uploads(argv)
    summary = client.commands.run(argv, files)
    job_id = summary["job_id"]
    if detach:
        if "--json" in argv:
            print_json(summary)
        else:
            say(f"job {job_id} queued in '{summary['queue']}'; "
                f"follow it with `forgeml jobs logs -f {job_id[:12]}`")  # fmt: skip
        return 0
    ended = client.jobs.follow(job_id, _write)
    if ended["state"] == "SUCCEEDED":
        return 0
    raise _failure(client.jobs.show(job_id), ended)


def _options_end(args: list[str]) -> int:
    # arguments after `--` belong to the command (`jobs submit -- CMD`), not to forgeml
    return args.index("--") if "--" in args else len(args)


def uploads(argv: list[str]) -> tuple[list[str], dict[str, bytes]]:
    """`argv` with each argument naming a local file rewritten to its bare name, and
    those files' contents by name (the command's own words are kept: `rag index`, not a
    file named `index`).

    Raises:
        UsageError: an argument names a folder, or two different files share a name.
    """
    from forgeml.client._commands import job_command

    key = job_command(argv)
    words = 1 if key is None or key[1] is None else 2
    rewritten, files = list(argv[:words]), dict[str, bytes]()
    for arg in argv[words:]:
        flag, equals, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        path = Path(value)
        if not value or not path.exists():
            rewritten.append(arg)
            continue
        if path.is_dir():
            raise UsageError(
                f"{value} is a folder of this machine: a command run on the server takes "
                "files only; name the files it needs."
            )
        data = path.read_bytes()
        if files.get(path.name, data) != data:
            raise UsageError(
                f"Two different files are named {path.name}: a command run on the server "
                "gets its files in one folder; rename one."
            )
        files[path.name] = data
        rewritten.append(f"{flag}{equals}{path.name}")
    return rewritten, files


def _write(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def _failure(detail: dict[str, Any], ended: dict[str, Any]) -> ForgemlError:
    attempts = detail["attempts"]  # the list of attempts, oldest first
    code = attempts[-1]["exit_code"] if attempts else None
    job_id = detail["job_id"]
    how = f"exited with code {code}" if code is not None else f"ended {ended['state']}"
    error = ForgemlError(f"The job {how} (job {job_id}; `forgeml jobs show {job_id[:12]}`).")
    error.exit_code = code if code else 1
    return error
