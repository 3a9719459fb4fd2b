"""A model bundle folder, checked and packed as a deterministic tar (same files, same digest)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from forgeml.core.archives import extract_tar as extract_archive
from forgeml.core.archives import pack_files, plain_member
from forgeml.core.errors import InvalidDataError, NotFoundError

REQUIRED_FILES = ("model.json",)
ONNX_WEIGHTS = "model.onnx"
# formats that may execute code when loaded; a bundle carries safetensors instead
PICKLE_SUFFIXES = frozenset({".pkl", ".pickle", ".pt", ".pth", ".ckpt", ".bin", ".joblib"})


def check_bundle(folder: Path) -> list[Path]:
    """The bundle's files (relative, sorted), after checking it is a safe, complete bundle.

    Raises:
        NotFoundError: the folder does not exist.
        InvalidDataError: a required file or the weights (safetensors, or an ONNX graph
            `model.onnx`) are missing, or a file is a pickle or a link.
    """
    if not folder.is_dir():
        raise NotFoundError(f"Model bundle folder {folder} does not exist.")
    files = sorted(path.relative_to(folder) for path in folder.rglob("*") if not path.is_dir())
    for path in files:
        if (folder / path).is_symlink():
            raise InvalidDataError(
                f"Model bundle {folder} contains the link {path}; copy the file in instead."
            )
        if path.suffix.lower() in PICKLE_SUFFIXES:
            raise InvalidDataError(
                f"Model bundle {folder} contains {path}, a pickle-based format that can run "
                "code when loaded; save weights as safetensors instead."
            )
    names = {path.as_posix() for path in files}
    missing = [name for name in REQUIRED_FILES if name not in names]
    if missing:
        raise InvalidDataError(f"Model bundle {folder} lacks {', '.join(missing)}.")
    # an ONNX graph is protobuf data, not code, so it may stand in for safetensors
    if not any(path.suffix == ".safetensors" for path in files) and ONNX_WEIGHTS not in names:
        raise InvalidDataError(
            f"Model bundle {folder} has no .safetensors weights file (nor an ONNX graph, "
            f"{ONNX_WEIGHTS})."
        )
    return files


def write_tar(folder: Path, files: list[Path], target: Path) -> None:
    """Pack `files` of `folder` into `target` with fixed metadata, so equal bundles hash equal."""
    pack_files(folder, files, target)


def _plain_files_only(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    # a pickle planted in a stored bundle must not reach a loader (check_bundle refused
    # it on the way in; this is the way out); then what every built folder follows
    if Path(member.name).suffix.lower() in PICKLE_SUFFIXES:
        raise tarfile.FilterError(f"it holds {member.name!r}, a pickle-based file")
    return plain_member(member, path)


def extract_tar(blob: Path, dest: Path) -> Path:
    """Unpack `blob` into `dest`, replacing what was there; a crash leaves old or new.

    Raises:
        InvalidDataError: the archive holds a link, a pickle, a member outside the folder,
            a device, or is not a tar; `dest` is left as it was.
    """
    return extract_archive(
        blob,
        dest,
        f"Model bundle archive {blob.name}",
        "a bundle holds plain, pickle-free files inside its folder only",
        _plain_files_only,
    )
