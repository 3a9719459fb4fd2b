"""A folder of plain files as one tar stream, and back: how the server hands a folder it
built (`models export` in remote mode) to a client that unpacks it into its own.

Unpacking follows Python's tarfile "data" filter (PEP 706), the fix for tarfile path
traversal (CVE-2007-4559): no absolute names, nothing outside the folder; and refuses
every link and anything that is not a plain file or folder, which a built folder never
holds. The archive lands in a private folder beside the destination and is renamed into
place, so a refused or broken archive leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from forgeml.core.errors import AlreadyExistsError, InvalidDataError

TAR_MEDIA_TYPE = "application/x-tar"
# beside the tar, what the command that built the folder prints with --json (as JSON)
SUMMARY_HEADER = "X-Forgeml-Summary"


def pack_folder(folder: Path, target: Path) -> None:
    """Write every file under `folder` into the tar `target`, by relative name, with fixed
    owner, time and mode (equal folders give equal archives)."""
    with tarfile.open(target, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(folder).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o644
            with path.open("rb") as handle:
                tar.addfile(info, handle)


def _plain_members(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    # a link, even one that stays inside the folder, could point a later write elsewhere
    if member.issym() or member.islnk():
        raise tarfile.FilterError(f"it holds the link {member.name!r}")
    # the "data" filter would strip the leading "/"; a built folder never has one
    if member.name.startswith(("/", "\\")) or os.path.isabs(member.name):
        raise tarfile.AbsolutePathError(member)
    if not (member.isfile() or member.isdir()):
        raise tarfile.FilterError(f"it holds {member.name!r}, which is not a plain file")
    return tarfile.data_filter(member, path)


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
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        try:
            with tarfile.open(blob, "r") as tar:
                tar.extractall(staging, filter=_plain_members)
        except tarfile.FilterError as error:
            raise InvalidDataError(
                f"{what} is refused: {_why(error)}; it may hold plain files inside its folder only."
            ) from None
        except tarfile.TarError as error:
            raise InvalidDataError(f"{what} is not a tar archive: {error}.") from None
        staging.chmod(0o755)  # mkdtemp's folder is private; the folder made is not
        if dest.exists():
            dest.rmdir()  # the caller checked it is empty
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest


def _why(error: tarfile.FilterError) -> str:
    if isinstance(error, tarfile.OutsideDestinationError | tarfile.AbsolutePathError):
        return f"the member {error.tarinfo.name!r} would land outside the folder"
    return str(error).rstrip(".")
