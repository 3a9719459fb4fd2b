"""The install's signing keys live in the metadata store: two servers of one database (a
home each) sign and verify the audit checkpoints alike, and an older install's key file is
moved into the store on first use (issue 15)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import select

from forgeml.core.audit_anchor import KEY_FILE
from forgeml.core.config import Settings
from forgeml.core.errors import AuditChainBrokenError, ConfigError
from forgeml.core.install_keys import AUDIT_KEY, install_key
from forgeml.core.store import AuditEvent, InstallKeyRecord
from forgeml.core.workspace import Workspace


def _two_homes(tmp_path: Path, db_url: str) -> Iterator[tuple[Workspace, Workspace]]:
    artifacts = str(tmp_path / "artifacts")
    pair = tuple(
        Workspace(Settings(home=tmp_path / f"home-{n}", db_url=db_url, artifacts_url=artifacts))
        for n in range(2)
    )
    try:
        yield pair[0], pair[1]
    finally:
        for workspace in pair:
            workspace.close()


@pytest.fixture
def two_homes(tmp_path: Path, backend_url: str) -> Iterator[tuple[Workspace, Workspace]]:
    """Two workspaces, each with its own home, on one database and one artifact store."""
    yield from _two_homes(tmp_path, backend_url)


def _write_events(workspace: Workspace, count: int, tag: str) -> None:
    with workspace.store.session() as session:
        for index in range(count):
            workspace.audit(session, "data.version.create", f"{tag}@v{index}", {"i": index})


def test_two_homes_on_one_database_verify_each_others_checkpoints(
    two_homes: tuple[Workspace, Workspace],
) -> None:
    first, second = two_homes
    _write_events(first, 3, "a")
    assert first.verify_audit().events == 3  # checkpoints 3 under the store's key
    _write_events(second, 2, "b")
    assert second.verify_audit().events == 5  # reads first's checkpoint, writes 5
    _write_events(first, 1, "c")

    assert first.verify_audit().events == 6
    assert second.verify_audit().events == 6
    assert not (first.settings.home / KEY_FILE).exists()
    assert not (second.settings.home / KEY_FILE).exists()


def test_two_homes_both_catch_a_truncation_checkpointed_by_the_other(
    two_homes: tuple[Workspace, Workspace],
) -> None:
    first, second = two_homes
    _write_events(first, 4, "a")
    first.verify_audit()
    with second.store.session() as session:
        session.execute(AuditEvent.__table__.delete().where(AuditEvent.seq >= 3))

    for workspace in two_homes:
        with pytest.raises(AuditChainBrokenError, match="events 3 to 4 are missing"):
            workspace.verify_audit()


def test_racing_first_uses_agree_on_one_key(two_homes: tuple[Workspace, Workspace]) -> None:
    stores = [workspace.store for workspace in two_homes] * 4

    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda store: install_key(store, "race"), stores))

    assert len(keys) == 1
    with stores[0].session(write=False) as session:
        rows = session.scalars(select(InstallKeyRecord).where(InstallKeyRecord.name == "race"))
        assert [row.origin for row in rows] == ["generated"]


def test_an_older_installs_key_file_is_moved_into_the_store(
    tmp_path: Path, backend_url: str
) -> None:
    older = tmp_path / "home-0" / KEY_FILE
    older.parent.mkdir(parents=True)
    older.write_text("ab" * 32 + "\n")

    with closing(Workspace(Settings(home=tmp_path / "home-0", db_url=backend_url))) as first:
        assert install_key(first.store, AUDIT_KEY, older) == bytes.fromhex("ab" * 32)
        with first.store.session(write=False) as session:
            assert session.get(InstallKeyRecord, AUDIT_KEY).origin == str(older)  # type: ignore[union-attr]
    older.write_text("cd" * 32)  # the file is no longer read: the store's key stays
    with closing(Workspace(Settings(home=tmp_path / "home-1", db_url=backend_url))) as second:
        assert install_key(second.store, AUDIT_KEY, older) == bytes.fromhex("ab" * 32)


def test_no_key_is_made_when_asked_not_to(workspace: Workspace) -> None:
    assert install_key(workspace.store, AUDIT_KEY, create=False) is None
    assert workspace.audit_anchor.read() is None


def test_a_garbled_key_file_is_refused_in_one_sentence(workspace: Workspace) -> None:
    garbled = workspace.settings.home / KEY_FILE
    garbled.parent.mkdir(parents=True, exist_ok=True)
    garbled.write_text("not hex")

    expected = r"^The key file .*audit\.key is not 64 hex digits: restore it, or delete it"
    with pytest.raises(ConfigError, match=expected):
        install_key(workspace.store, AUDIT_KEY, garbled)
