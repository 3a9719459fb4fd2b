"""The opened workspace: settings, metadata store and artifact store, together."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import UsageError

if TYPE_CHECKING:
    from forgeml.core.artifacts import ArtifactStore
    from forgeml.core.audit_anchor import AuditAnchor
    from forgeml.core.config import Settings
    from forgeml.core.store import Store

# The stores (SQLAlchemy, fsspec, pydantic-settings) are imported when first used, so that
# `import forgeml` and `forgeml --help` stay cheap.


@dataclass
class Workspace:
    """Everything a command needs to read and write forgeml's records."""

    settings: Settings
    # who acts, when not the settings' user: the authenticated caller of an API request
    acting: str | None = field(default=None, compare=False)
    # the project acted in, when not the settings' one: an API request's project
    working_in: str | None = field(default=None, compare=False)

    @cached_property
    def store(self) -> Store:
        from forgeml.core.store import open_store

        return open_store(self.settings.database_url)

    @cached_property
    def artifacts(self) -> ArtifactStore:
        from forgeml.core.artifacts import ArtifactStore

        return ArtifactStore(self.settings.artifact_root)

    @property
    def actor(self) -> str:
        return self.acting or self.settings.actor

    @property
    def project(self) -> str:
        """The project new resources are created in and lists show (FORGEML_PROJECT, or an
        API request's project)."""
        return self.working_in or self.settings.project

    def check_own(self, kind: str, name: str, project: str) -> None:
        """Refuse to use the `kind` called `name`, which belongs to `project`, unless this
        workspace acts in that project (what uses a prompt or RAG index of another kind's
        request: a gateway call, an agent, `rag answer`, a command job).

        Raises:
            OtherProjectError: `project` is not this workspace's project.
        """
        if project != self.project:
            from forgeml.core.errors import OtherProjectError

            raise OtherProjectError(
                f"{kind} {name!r} belongs to the project {project!r}, not {self.project!r}; "
                "act in its project (FORGEML_PROJECT, or the X-Forgeml-Project header)."
            )

    def acting_as(self, actor: str) -> Workspace:
        """This workspace (the same stores, opened once) with `actor` named by every record
        and audit event it writes. The view shares the stores: close the original, not it."""
        return self._view(actor, self.working_in)

    def in_project(self, project: str) -> Workspace:
        """This workspace (the same stores) acting in `project`; closed like `acting_as`'s."""
        return self._view(self.acting or self.settings.actor, project)

    def _view(self, actor: str, project: str | None) -> Workspace:
        view = Workspace(self.settings, acting=actor, working_in=project)
        # the cached stores are shared, not reopened: one engine pool per process
        view.__dict__["store"] = self.store
        view.__dict__["artifacts"] = self.artifacts
        return view

    @cached_property
    def audit_anchor(self) -> AuditAnchor:
        from forgeml.core.audit_anchor import AuditAnchor

        return AuditAnchor(self.settings.home, self.artifacts.fs, self.artifacts.root, self.store)

    def verify_audit(self) -> Any:
        """Check the audit chain against its signed checkpoint, then checkpoint its head:
        what `forgeml audit verify` and the API's verify both do.

        Returns:
            `audit.VerifyResult` (events, head).

        Raises:
            AuditChainBrokenError: one sentence naming the edited, deleted or missing
                events, or the rewritten checkpoint.
        """
        from forgeml.core import audit

        checkpoint = self.audit_anchor.read()
        with self.store.session() as session:
            result = audit.verify(session, checkpoint)
        self.audit_anchor.write(result.events, result.head)
        return result

    def audit(self, session: Any, action: str, object_ref: str, payload: dict[str, Any]) -> None:
        """Append an audit event inside `session`'s transaction; every
        `CHECKPOINT_EVERY`th is checkpointed once that transaction commits."""
        from sqlalchemy import event as sa_event

        from forgeml.core import audit
        from forgeml.core.audit_anchor import CHECKPOINT_EVERY

        appended = audit.append(session, self.actor, action, object_ref, payload)
        if appended.seq % CHECKPOINT_EVERY == 0:
            seq, head = appended.seq, appended.hash
            # after the commit: a rolled-back event must never be claimed by a checkpoint
            sa_event.listen(
                session, "after_commit", lambda _: self.audit_anchor.write(seq, head), once=True
            )

    def close(self) -> None:
        if self.acting is None and "store" in self.__dict__:
            self.store.dispose()


# what `open_workspace` opened and `close_opened_workspaces` has not closed yet
_opened: list[Workspace] = []


def open_workspace(settings: Settings | None = None) -> Workspace:
    """The workspace described by `settings` (default: the environment's); closed by its
    opener or, at the latest, by `close_opened_workspaces` (the CLI's end of a command)."""
    from forgeml.core.config import get_settings

    workspace = Workspace(settings or get_settings())
    _opened.append(workspace)
    return workspace


def close_opened_workspaces() -> None:
    """Close every workspace `open_workspace` opened: their database connections end
    (a PostgreSQL server counts each until then)."""
    while _opened:
        _opened.pop().close()


def inside_home(home: Path, path: Path, what: str) -> Path:
    """`path` (relative: to `home`) once it is known to stay inside `home`.

    A server that writes where a request or a flag says can be made to overwrite any file
    its user may write (Triton CVE-2024-0087); links are resolved before the check.

    Raises:
        UsageError: the path resolves outside FORGEML_HOME.
    """
    resolved = (home / path).resolve()  # an absolute `path` replaces `home`
    if not resolved.is_relative_to(home.resolve()):
        raise UsageError(
            f"The {what} path {path} lies outside FORGEML_HOME ({home}); "
            "give a path inside it (a relative one is read from there)."
        )
    return resolved
