"""Projects and memberships: the role each account holds in each project.

A request that names no project acts in `default`. Granting is bounded by the granter's own
permissions (`check_grant`): nobody hands out, or takes away, more than they hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from forgeml.auth._users import aware, check_not_last_owner, find_user
from forgeml.auth.roles import check_role, role_permissions
from forgeml.core import audit
from forgeml.core.errors import (
    AlreadyExistsError,
    LastOwnerError,
    NotFoundError,
    PermissionDeniedError,
)
from forgeml.core.ids import new_id, validate_name
from forgeml.core.store import MembershipRecord, ProjectRecord, UserRecord
from forgeml.core.workspace import Workspace

DEFAULT_PROJECT = "default"


def _find_project(session: Session, name: str) -> ProjectRecord:
    record = session.scalar(select(ProjectRecord).where(ProjectRecord.name == name))
    if record is None:
        raise NotFoundError(f"No project is called {name!r}.")
    return record


def _ensure_project(session: Session, name: str, actor: str, now: datetime) -> ProjectRecord:
    record = session.scalar(select(ProjectRecord).where(ProjectRecord.name == name))
    if record is None:
        record = ProjectRecord(id=new_id(), name=validate_name(name, "project name"))
        record.created_at, record.created_by = now, actor
        session.add(record)
        session.flush()
        audit.append(session, actor, "project.create", f"project:{name}", {})
    return record


def create_project(
    workspace: Workspace,
    name: str,
    *,
    actor: str,
    owner: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Create a project; `owner` (an account name) becomes its owner.

    Raises:
        InvalidNameError: `name` is not a plain identifier.
        AlreadyExistsError: the name is taken.
        NotFoundError: `owner` is not an account.
    """
    validate_name(name, "project name")
    moment = now or datetime.now(UTC)
    with workspace.store.session() as session:
        if session.scalar(select(ProjectRecord.id).where(ProjectRecord.name == name)):
            raise AlreadyExistsError(f"A project called {name!r} exists already.")
        project = _ensure_project(session, name, actor, moment)
        if owner is not None:
            _grant(session, project, find_user(session, owner), "owner", "manual", actor, moment)
        return {"name": name, "created_at": aware(project.created_at), "created_by": actor}


def list_projects(workspace: Workspace) -> list[dict[str, Any]]:
    """Every project with its member count, by name."""
    with workspace.store.session() as session:
        projects = session.scalars(select(ProjectRecord).order_by(ProjectRecord.name)).all()
        counts: dict[str, int] = {}
        for project_id in session.scalars(select(MembershipRecord.project_id)):
            counts[project_id] = counts.get(project_id, 0) + 1
        return [
            {
                "name": p.name,
                "members": counts.get(p.id, 0),
                "created_at": aware(p.created_at),
                "created_by": p.created_by,
            }
            for p in projects
        ]


def list_members(workspace: Workspace, project: str) -> list[dict[str, Any]]:
    """The accounts of `project` with their roles (NotFoundError for an unknown project)."""
    with workspace.store.session() as session:
        record = _find_project(session, project)
        rows = session.execute(
            select(UserRecord.name, UserRecord.kind, MembershipRecord)
            .join(MembershipRecord, MembershipRecord.user_id == UserRecord.id)
            .where(MembershipRecord.project_id == record.id)
            .order_by(UserRecord.name)
        ).all()
        return [
            {
                "user": name,
                "kind": kind,
                "role": m.role,
                "source": m.source,
                "granted_at": aware(m.granted_at),
                "granted_by": m.granted_by,
            }
            for name, kind, m in rows
        ]


def role_in(session: Session, user_id: str, project: str) -> str | None:
    """The role account `user_id` holds in `project` (None: none, or no such project)."""
    return session.scalar(
        select(MembershipRecord.role)
        .join(ProjectRecord, ProjectRecord.id == MembershipRecord.project_id)
        .where(MembershipRecord.user_id == user_id, ProjectRecord.name == project)
    )


def roles_of(workspace: Workspace, user: str) -> dict[str, str]:
    """Every role account `user` holds, by project (NotFoundError for an unknown account)."""
    with workspace.store.session() as session:
        account = find_user(session, user)
        rows = session.execute(
            select(ProjectRecord.name, MembershipRecord.role)
            .join(ProjectRecord, ProjectRecord.id == MembershipRecord.project_id)
            .where(MembershipRecord.user_id == account.id)
            .order_by(ProjectRecord.name)
        ).all()
        return {name: role for name, role in rows}


def check_grant(granter: frozenset[str] | None, role: str | None) -> None:
    """Refuse granting or removing `role` by someone holding only `granter` (None: the
    local administrator, who may do anything).

    Raises:
        PermissionDeniedError: `role` holds a permission `granter` lacks.
    """
    if granter is None or role is None:
        return
    missing = role_permissions(role) - granter
    if missing:
        raise PermissionDeniedError(
            f"You cannot grant or take away the role {role}: it holds {sorted(missing)[0]}, "
            "which you do not."
        )


def _grant(
    session: Session,
    project: ProjectRecord,
    user: UserRecord,
    role: str,
    source: str,
    actor: str,
    now: datetime,
) -> MembershipRecord:
    membership = session.get(MembershipRecord, (user.id, project.id))
    if membership is None:
        membership = MembershipRecord(user_id=user.id, project_id=project.id)
        session.add(membership)
    membership.role, membership.source = role, source
    membership.granted_at, membership.granted_by = now, actor
    payload = {"user": user.name, "role": role, "source": source}
    audit.append(session, actor, "project.member.set", f"project:{project.name}", payload)
    return membership


def _keeps_last_owner(
    session: Session,
    account: UserRecord,
    membership: MembershipRecord,
    project: str,
    change: str,
    actor: str,
) -> bool:
    """Whether a synced change (`change`: the owner's removal or demotion) is skipped
    because `account` is `project`'s last enabled owner; the kept role is audited. An
    identity provider's group edit must not leave a project nobody can manage."""
    if membership.role != "owner":
        return False
    try:
        check_not_last_owner(session, account, change, project)
    except LastOwnerError as error:
        payload = {"user": account.name, "role": "owner", "why": str(error)}
        audit.append(session, actor, "project.member.keep", f"project:{project}", payload)
        return True
    return False


def add_member(
    workspace: Workspace,
    project: str,
    user: str,
    role: str,
    *,
    actor: str,
    granter: frozenset[str] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Give `user` `role` in `project` (replacing the role it held there).

    `granter`: the permissions of whoever asks (None: the local administrator); they must
    cover both the role given and the role replaced.

    Raises:
        UsageError: an unknown role.
        NotFoundError: no such project or account.
        PermissionDeniedError: the granter holds less than either role.
        LastOwnerError: `user` is the project's last enabled owner and `role` is less.
    """
    check_role(role)
    check_grant(granter, role)
    with workspace.store.session() as session:
        moment = now or datetime.now(UTC)
        if project == DEFAULT_PROJECT:
            record = _ensure_project(session, project, actor, moment)
        else:
            record = _find_project(session, project)
        account = find_user(session, user)
        check_grant(granter, role_in(session, account.id, project))
        if role != "owner":
            check_not_last_owner(session, account, f"make {user} {role}", project)
        membership = _grant(session, record, account, role, "manual", actor, moment)
        return {"project": project, "user": user, "role": membership.role}


def remove_member(
    workspace: Workspace,
    project: str,
    user: str,
    *,
    actor: str,
    granter: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Take `user`'s role in `project` away.

    Raises:
        NotFoundError: no such project or account, or the account is not a member.
        PermissionDeniedError: the granter holds less than the member's role.
        LastOwnerError: `user` is the project's last enabled owner.
    """
    with workspace.store.session() as session:
        record = _find_project(session, project)
        account = find_user(session, user)
        membership = session.get(MembershipRecord, (account.id, record.id))
        if membership is None:
            raise NotFoundError(f"{user!r} is not a member of the project {project!r}.")
        check_grant(granter, membership.role)
        check_not_last_owner(session, account, f"remove {user}", project)
        session.delete(membership)
        payload = {"user": user, "role": membership.role}
        audit.append(session, actor, "project.member.remove", f"project:{project}", payload)
        return {"project": project, "user": user, "removed": membership.role}


def set_project_roles(
    workspace: Workspace,
    user: str,
    roles_by_project: Mapping[str, str],
    *,
    actor: str,
    source: str = "oidc",
    now: datetime | None = None,
) -> dict[str, str]:
    """Make `user`'s `source` memberships exactly `roles_by_project` (an OIDC sign-in's
    groups mapped to roles): projects are created when missing, memberships of `source`
    absent from the mapping are removed, and a manual membership is never changed. The
    last enabled owner of a project stays its owner (audited `project.member.keep`).

    Returns:
        Every role `user` now holds, by project.

    Raises:
        UsageError: an unknown role.
        NotFoundError: no such account.
    """
    for role in roles_by_project.values():
        check_role(role)
    moment = now or datetime.now(UTC)
    with workspace.store.session() as session:
        account = find_user(session, user)
        held = {
            project.name: membership
            for membership, project in session.execute(
                select(MembershipRecord, ProjectRecord)
                .join(ProjectRecord, ProjectRecord.id == MembershipRecord.project_id)
                .where(MembershipRecord.user_id == account.id)
            ).all()
        }
        for name, membership in held.items():
            if membership.source != source or name in roles_by_project:
                continue
            if _keeps_last_owner(session, account, membership, name, f"remove {user}", actor):
                continue
            session.delete(membership)
            payload = {"user": user, "role": membership.role}
            audit.append(session, actor, "project.member.remove", f"project:{name}", payload)
        for name, role in sorted(roles_by_project.items()):
            current = held.get(name)
            if current is not None and (current.source != source or current.role == role):
                continue
            if current is not None and _keeps_last_owner(
                session, account, current, name, f"make {user} {role}", actor
            ):
                continue
            project = _ensure_project(session, name, actor, moment)
            _grant(session, project, account, role, source, actor, moment)
    return roles_of(workspace, user)
