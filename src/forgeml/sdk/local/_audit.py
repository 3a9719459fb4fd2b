"""The local side of the audit log's seam (`forgeml.sdk.audit`, `forgeml audit`)."""

from __future__ import annotations

from contextlib import closing
from typing import Any

from forgeml.core.workspace import open_workspace


class LocalAudit:
    """The local audit log, as `forgeml.client.Audit` answers it remotely."""

    def latest(self, limit: int = 50) -> list[dict[str, Any]]:
        from sqlalchemy import select

        from forgeml.core import audit
        from forgeml.core.store import AuditEvent

        newest = select(AuditEvent).order_by(AuditEvent.seq.desc()).limit(limit)
        with closing(open_workspace()) as workspace, workspace.store.session() as session:
            return [audit.event_summary(e) for e in session.scalars(newest)][::-1]

    def verify(self) -> dict[str, Any]:
        with closing(open_workspace()) as workspace:
            result = workspace.verify_audit()
        return {"intact": True, "events": result.events, "head": result.head}
