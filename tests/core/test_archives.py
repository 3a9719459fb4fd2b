"""`core.archives`' unpack budget: the members and bytes of one request's archives, counted
together on each member's header, refused past either limit with nothing left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from forgeml.core.archives import UnpackBudget, extract_tar, pack_folder
from forgeml.core.errors import InvalidDataError, PayloadTooLargeError, UnsafeArchiveError


def _tar(tmp_path: Path, name: str, files: dict[str, bytes]) -> Path:
    folder = tmp_path / "src" / name
    for file, data in files.items():
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / file).write_bytes(data)
    pack_folder(folder, tmp_path / f"{name}.tar")
    return tmp_path / f"{name}.tar"


def _unpack(blob: Path, dest: Path, budget: UnpackBudget) -> Path:
    return extract_tar(blob, dest, "folders.x", "plain files only", budget.filter())


def test_archives_within_the_budget_unpack_and_are_counted_together(tmp_path: Path) -> None:
    budget = UnpackBudget(max_bytes=10, max_members=3, what="folders", spent=4)
    one = _tar(tmp_path, "one", {"a.txt": b"abc"})
    two = _tar(tmp_path, "two", {"b/c.txt": b"def"})

    _unpack(one, tmp_path / "out" / "one", budget)
    _unpack(two, tmp_path / "out" / "two", budget)

    assert (budget.members, budget.bytes) == (2, 10)
    assert (tmp_path / "out" / "two" / "b" / "c.txt").read_bytes() == b"def"


@pytest.mark.parametrize(
    ("budget", "error"),
    [
        (UnpackBudget(5, 100, "folders"), "folders: over this server's upload limit of 5 bytes."),
        (UnpackBudget(9, 100, "folders", spent=5), "folders: over this server's upload limit of 9"),
        (UnpackBudget(100, 1, "folders"), "folders: over this server's limit of 1 files"),
    ],
)
def test_an_archive_over_the_budget_is_refused_and_leaves_nothing(
    tmp_path: Path, budget: UnpackBudget, error: str
) -> None:
    blob = _tar(tmp_path, "big", {"a.txt": b"abc", "b.txt": b"def"})
    (tmp_path / "out").mkdir()

    with pytest.raises(PayloadTooLargeError) as raised:
        _unpack(blob, tmp_path / "out" / "big", budget)

    assert str(raised.value).startswith(error)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_refused_member_is_a_bad_request_and_still_invalid_data() -> None:
    assert issubclass(UnsafeArchiveError, InvalidDataError)
    assert (UnsafeArchiveError.http_status, InvalidDataError.http_status) == (400, 422)
