"""A folder of plain files as one tar stream, and back: how the server hands a folder it
built (`models export` in remote mode) to a client that unpacks it into its own, and how a
client sends a folder a command names to the server (`POST /api/v1/commands`).

Unpacking follows Python's tarfile "data" filter (PEP 706), the fix for tarfile path
traversal (CVE-2007-4559): no absolute names, nothing outside the folder; and refuses
every link and anything that is not a plain file or folder, which a built folder never
holds. The archive lands in a private folder beside the destination and is renamed into
place, so a refused or broken archive leaves nothing behind. An `UnpackBudget` bounds
what archives from a caller may unpack to (members and bytes), checked on each member's
header before its data is read, so a small compressed archive cannot fill the disk.
"""

from __future__ import annotations

import errno
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

from forgeml.core.errors import (
    AlreadyExistsError,
    InvalidDataError,
    PayloadTooLargeError,
    UnsafeArchiveError,
)

TAR_MEDIA_TYPE = "application/x-tar"
# beside the tar, what the command that built the folder prints with --json (as JSON)
SUMMARY_HEADER = "X-Forgeml-Summary"


def pack_files(folder: Path, names: Iterable[Path], target: Path) -> None:
    """Write the files `names` (relative to `folder`) into the tar `target`, in that order,
    with fixed owner, time and mode (equal folders give equal archives)."""
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            _add(tar, folder / name, name.as_posix())


def pack_named(
    files: Mapping[str, Path], folders: Mapping[str, tuple[Path, Sequence[Path]]], target: IO[bytes]
) -> None:
    """Write one tar into the open binary file `target`: each of `files` by its name, and
    each of `folders` (name: its path and the files below it, relative to it) as a folder
    of that name holding them; what a client sends as a command's folder. The bytes are
    copied a block at a time, so nothing is held whole in memory."""
    with tarfile.open(fileobj=target, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in files.items():
            _add(tar, path, name)
        for name, (folder, names) in folders.items():
            # the folder itself first: an empty one arrives too
            _add(tar, folder, name)
            for inner in names:
                _add(tar, folder / inner, f"{name}/{inner.as_posix()}")


def _add(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    """`path` (a file or a folder, not what is in it) as `arcname`, with fixed owner, time
    and mode."""
    info = tar.gettarinfo(str(path), arcname=arcname)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    if info.isdir():
        info.mode = 0o755
        tar.addfile(info)
        return
    info.mode = 0o644
    with path.open("rb") as handle:
        tar.addfile(info, handle)


def pack_folder(folder: Path, target: Path) -> None:
    """Write every file under `folder` into the tar `target`, by relative name (sorted)."""
    names = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    pack_files(folder, names, target)


def plain_member(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    """The tar member filter of a built folder: Python's "data" filter, and no link (even
    one that stays inside could point a later write elsewhere: ClearML CVE-2025-8917), no
    absolute name, nothing but plain files and folders."""
    if member.issym() or member.islnk():
        raise tarfile.FilterError(f"it holds the link {member.name!r}")
    # the "data" filter would strip the leading "/"; a built folder never has one
    if member.name.startswith(("/", "\\")) or os.path.isabs(member.name):
        raise tarfile.AbsolutePathError(member)
    if not (member.isfile() or member.isdir()):
        raise tarfile.FilterError(f"it holds {member.name!r}, which is not a plain file")
    return tarfile.data_filter(member, path)


# what an archive's names can make extraction fail with
_REFUSED_ERRNOS = frozenset({errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENAMETOOLONG})

MemberFilter = Callable[[tarfile.TarInfo, str], tarfile.TarInfo | None]


class UnpackBudget:
    """How many members and file bytes the archives of one request may unpack to, together.

    `filter` wraps a member filter: a member it lets through is counted, and one over
    either limit refuses the archive with `PayloadTooLargeError` (`extract_tar` then leaves
    nothing behind). `what` names the upload in the error; `spent` is what the rest of the
    request already holds (bytes).
    """

    def __init__(self, max_bytes: int, max_members: int, what: str, spent: int = 0) -> None:
        self.max_bytes, self.max_members, self.what = max_bytes, max_members, what
        self.bytes, self.members = spent, 0

    def filter(self, inner: MemberFilter = plain_member) -> MemberFilter:
        def bounded(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
            kept = inner(member, path)
            self.members += 1
            self.bytes += member.size
            if self.members > self.max_members:
                raise PayloadTooLargeError(
                    f"{self.what}: over this server's limit of {self.max_members:,} files "
                    "and folders in one upload."
                )
            if self.bytes > self.max_bytes:
                raise PayloadTooLargeError(
                    f"{self.what}: over this server's upload limit of {self.max_bytes:,} bytes."
                )
            return kept

        return bounded


def extract_tar(
    blob: Path, dest: Path, what: str, rule: str, member_filter: MemberFilter = plain_member
) -> Path:
    """Unpack the tar `blob` as the folder `dest`, replacing what was there; a crash leaves
    the old or the new. `what` names the archive and `rule` says what it may hold, in an
    error.

    Raises:
        UnsafeArchiveError: `member_filter` refused a member (a link, a device, a member
            outside the folder); `dest` is left as it was and nothing else is written.
        InvalidDataError: `blob` is not a tar; the same.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        try:
            with tarfile.open(blob, "r") as tar:
                tar.extractall(staging, filter=member_filter)
        except tarfile.FilterError as error:
            raise UnsafeArchiveError(f"{what} is refused: {_why(error)}; {rule}.") from None
        except tarfile.TarError as error:
            raise InvalidDataError(f"{what} is not a tar archive: {error}.") from None
        except OSError as error:
            # a name as a file and as a folder (`x` and `x/a`), or a name too long: the
            # archive's fault; anything else (a full disk) is the server's
            if error.errno not in _REFUSED_ERRNOS:
                raise
            why = (error.strerror or "cannot be written").lower()
            raise UnsafeArchiveError(
                f"{what} is refused: {why} at {_inside(error, staging)}; {rule}."
            ) from None
        staging.chmod(0o755)  # mkdtemp's folder is private; the folder made is not
        if dest.exists():
            old = dest.with_name(f".{dest.name}-old-{os.getpid()}")
            os.replace(dest, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest


def unpack_folder(blob: Path, dest: Path, what: str) -> Path:
    """Unpack the tar `blob` as the new folder `dest` (absent or empty); `what` names the
    archive in an error.

    Raises:
        AlreadyExistsError: `dest` is not an absent or empty folder.
        InvalidDataError: the archive holds a link, a device, a member outside the folder,
            or is not a tar; nothing is written.
    """
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise AlreadyExistsError(
            f"{dest} exists and is not an empty folder; choose a new folder for {what}."
        )
    return extract_tar(blob, dest, what, "it may hold plain files inside its folder only")


def _inside(error: OSError, staging: Path) -> str:
    name = str(error.filename or "")
    return repr(name.removeprefix(f"{staging}{os.sep}")[:120]) if name else "a member"


def _why(error: tarfile.FilterError) -> str:
    outside = (
        tarfile.OutsideDestinationError | tarfile.AbsolutePathError | tarfile.AbsoluteLinkError
    )
    if isinstance(error, outside):
        return f"the member {error.tarinfo.name!r} would land outside the folder"
    return str(error).rstrip(".")
