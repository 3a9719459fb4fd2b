"""Remote mode of the heavy commands (train, tune, rag index, pipelines run, ...): each runs
on the server as a job of its own CLI (`POST /api/v1/commands`).

The local files and folders the command line names (an argument, or the value of
`--opt=value`, that is an existing path) are uploaded with it and the arguments rewritten
to their bare names: the job runs in a folder holding them. They are packed as one tar of
plain files (`forgeml.core.archives.pack_named`; a folder holding a link or a device is
refused here, as the server would) into a temporary file, and streamed from it, so a
folder of many gigabytes is never whole in memory (`POST /api/v1/commands/archive`).
Two different paths of one name are refused. The server removes them when the job
ends. Then the job's log is followed, as `jobs logs -f` does, onto stdout (the job's
stdout and stderr, in order), and the command exits as the job did: 0 when it succeeded,
else its exit code (1 when it has none) with one sentence naming it.
`--detach` prints the job's summary (`jobs submit --detach`) and returns.
"""

from __future__ import annotations

import filecmp
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from forgeml.cli._output import print_json, say
from forgeml.core.errors import ForgemlError, UsageError

if TYPE_CHECKING:
    from forgeml.client import Client

DETACH = "--detach"


def run_as_job(client: Client, args: list[str]) -> int:
    """Run `forgeml *args` on the server as a job; its exit code (0) or raise its failure.

    Raises:
        UsageError: a named folder holds a link, or two paths share a name.
        ForgemlError: the job did not succeed (its exit code, or 1).
    """
    options = _options_end(args)
    detach = DETACH in args[:options]
    argv = [arg for i, arg in enumerate(args) if not (arg == DETACH and i < options)]
    argv, named = uploads(argv)
    if named.empty:
        summary = client.commands.run(argv, {})
    else:
        with pack(named) as archive:
            summary = client.commands.run_archive(argv, archive)
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


@dataclass
class Named:
    """The local files and folders a command line names, by the bare names it is rewritten
    to; a folder with its plain files (relative to it, sorted)."""

    files: dict[str, Path] = field(default_factory=dict)
    folders: dict[str, tuple[Path, list[Path]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.files and not self.folders

    def add(self, path: Path) -> str:
        """Name `path` (a file or a folder) by its bare name; returns the name.

        Raises:
            UsageError: a folder holds a link or a device, or another path has the name.
        """
        if path.is_dir():
            folder = path.resolve()
            name = folder.name  # `docs/`, `.` and `..` go by the folder's own name
            known = self.folders.get(name)
            taken = name in self.files or (known is not None and known[0] != folder)
            if known is None and not taken:
                self.folders[name] = (folder, _plain_files(folder))
        else:
            name = path.name
            known_file = self.files.setdefault(name, path)
            taken = name in self.folders or not _same_file(known_file, path)
        if taken:
            raise UsageError(
                f"Two different paths are named {name}: a command run on the server gets "
                "its files and folders in one folder; rename one."
            )
        return name


def uploads(argv: list[str]) -> tuple[list[str], Named]:
    """`argv` with each argument naming a local file or folder rewritten to its bare name,
    and those files and folders; the command's own words are kept: `rag index`, not a file
    named `index`.

    Raises:
        UsageError: a folder holds a link or a device, or two different paths share a name.
    """
    from forgeml.client._commands import job_command

    key = job_command(argv)
    words = 1 if key is None or key[1] is None else 2
    rewritten, named = list(argv[:words]), Named()
    for arg in argv[words:]:
        flag, equals, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        path = Path(value)
        if not value or not path.exists():
            rewritten.append(arg)
            continue
        rewritten.append(f"{flag}{equals}{named.add(path)}")
    return rewritten, named


def _same_file(one: Path, other: Path) -> bool:
    # two paths of one name may be sent once when their bytes are the same
    return one.resolve() == other.resolve() or filecmp.cmp(one, other, shallow=False)


def _plain_files(folder: Path) -> list[Path]:
    """The plain files below `folder`, relative to it, sorted.

    Raises:
        UsageError: it holds a link, or something that is neither a file nor a folder.
    """
    names = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise UsageError(
                f"{path} is a link or a device: a folder sent to the server holds plain "
                "files and folders only; copy what it points to instead."
            )
        if path.is_file():
            names.append(path.relative_to(folder))
    return names


@contextmanager
def pack(named: Named) -> Iterator[IO[bytes]]:
    """`named` as one tar (the job's folder: `forgeml.core.archives.pack_named`) in a
    temporary file, open at its start; the file is removed when the block ends. Only a
    block of a file at a time is in memory, however large the folders."""
    from forgeml.core.archives import pack_named

    with tempfile.TemporaryFile(prefix="forgeml-upload-", suffix=".tar") as archive:
        pack_named(named.files, named.folders, archive)
        archive.seek(0)
        yield archive


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
