"""Truncating the audit log's newest events, the gap a hash chain alone leaves open: a
signed checkpoint outside the table (`core/audit_anchor.py`) catches it, on SQLite and
PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import delete

from forgeml.core import audit, audit_anchor
from forgeml.core.config import Settings
from forgeml.core.errors import AuditChainBrokenError
from forgeml.core.store import AuditEvent, InstallKeyRecord
from forgeml.core.workspace import Workspace
from tests.cli.conftest import assert_cli_error, assert_ok
from tests.conftest import CliResult


def add_events(workspace: Workspace, count: int) -> None:
    with workspace.store.session() as session:
        for index in range(count):
            workspace.audit(session, "data.version.create", f"d@v{index}", {"i": index})


def delete_from(workspace: Workspace, seq: int) -> None:
    with workspace.store.session() as session:
        session.execute(delete(AuditEvent).where(AuditEvent.seq >= seq))


def verify(workspace: Workspace) -> audit.VerifyResult:
    result: audit.VerifyResult = workspace.verify_audit()
    return result


def checkpoint_five(workspace: Workspace) -> Workspace:
    add_events(workspace, 5)
    result = verify(workspace)
    workspace.audit_anchor.write(result.events, result.head)
    return workspace


@pytest.fixture
def checkpointed(workspace: Workspace) -> Workspace:
    return checkpoint_five(workspace)


def test_audit_truncation_deleting_the_newest_events_is_named(any_workspace: Workspace) -> None:
    checkpoint_five(any_workspace)
    delete_from(any_workspace, 4)

    with pytest.raises(AuditChainBrokenError) as raised:
        verify(any_workspace)

    assert str(raised.value).startswith(
        "Audit log truncated: events 4 to 5 are missing (the signed checkpoint of "
    )
    assert str(raised.value).endswith("records 5 events; the log ends at 3).")


def test_audit_truncation_deleting_every_event_is_named(checkpointed: Workspace) -> None:
    delete_from(checkpointed, 1)

    with pytest.raises(AuditChainBrokenError, match="events 1 to 5 are missing"):
        verify(checkpointed)


def test_audit_truncation_a_replaced_tail_differs_from_the_checkpoint(
    checkpointed: Workspace,
) -> None:
    delete_from(checkpointed, 4)
    add_events(checkpointed, 2)  # a chain that verifies alone, rewritten after event 3

    with pytest.raises(
        AuditChainBrokenError, match="broken at event 5: it differs from the signed"
    ):
        verify(checkpointed)


def test_audit_truncation_a_rewritten_checkpoint_is_refused(checkpointed: Workspace) -> None:
    delete_from(checkpointed, 4)
    path = Path(checkpointed.audit_anchor.path)
    forged = json.loads(path.read_text()) | {"seq": 3}
    path.write_text(json.dumps(forged))

    with pytest.raises(AuditChainBrokenError, match="was rewritten: its signature does not"):
        verify(checkpointed)


def test_audit_truncation_a_deleted_checkpoint_is_refused(checkpointed: Workspace) -> None:
    Path(checkpointed.audit_anchor.path).unlink()

    with pytest.raises(AuditChainBrokenError, match="was deleted"):
        verify(checkpointed)


def test_audit_truncation_the_key_is_kept_in_the_store_not_in_the_home(
    checkpointed: Workspace,
) -> None:
    with checkpointed.store.read_session() as session:
        stored = session.get(InstallKeyRecord, "audit")

    assert stored is not None and stored.origin == "generated"
    assert not (checkpointed.settings.home / audit_anchor.KEY_FILE).exists()


def test_audit_truncation_every_nth_committed_event_is_checkpointed(
    any_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_anchor, "CHECKPOINT_EVERY", 3)
    add_events(any_workspace, 4)
    with pytest.raises(RuntimeError), any_workspace.store.session() as session:
        for index in range(2):  # events 5 and 6, rolled back: 6 must not be checkpointed
            any_workspace.audit(session, "x", f"r{index}", {})
        raise RuntimeError("the transaction fails")

    checkpoint = any_workspace.audit_anchor.read()
    assert checkpoint is not None and checkpoint.seq == 3
    delete_from(any_workspace, 3)
    with pytest.raises(AuditChainBrokenError, match="event 3 is missing"):
        verify(any_workspace)


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Workspace]:
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    yield workspace
    workspace.close()


def test_audit_truncation_cli_verify_names_the_missing_tail(
    cli: Callable[..., CliResult], home: Workspace
) -> None:
    add_events(home, 4)
    assert_ok(cli("audit", "verify"))  # checkpoints the head: 4 events
    delete_from(home, 4)

    assert_cli_error(cli("audit", "verify"), "error: Audit log truncated: event 4 is missing")
