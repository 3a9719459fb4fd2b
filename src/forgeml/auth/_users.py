"""Users: people (a password, an OIDC identity, or both) and service accounts (tokens only).

Every change is audited under the actor who made it; no function here returns or logs a
password or its hash.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forgeml.auth._passwords import Passwords
from forgeml.core import audit
from forgeml.core.errors import (
    AlreadyExistsError,
    InvalidRequestError,
    LastOwnerError,
    NotFoundError,
)
from forgeml.core.ids import new_id, validate_name
from forgeml.core.store import MembershipRecord, ProjectRecord, UserRecord
from forgeml.core.workspace import Workspace

KINDS = ("user", "service")


def aware(moment: datetime | None) -> datetime | None:
    """`moment` as UTC-aware (SQLite hands back naive datetimes; every stored time is UTC)."""
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def user_summary(record: UserRecord) -> dict[str, Any]:
    """What may be shown of an account (never its password hash)."""
    return {
        "name": record.name,
        "kind": record.kind,
        "email": record.email,
        "disabled": record.disabled,
        "has_password": record.password_hash is not None,
        "external": record.external_subject is not None,
        "created_at": aware(record.created_at),
        "created_by": record.created_by,
    }


def find_user(session: Session, name: str) -> UserRecord:
    """The account called `name`.

    Raises:
        NotFoundError: there is none.
    """
    record = session.scalar(select(UserRecord).where(UserRecord.name == name))
    if record is None:
        raise NotFoundError(f"No account is called {name!r}.")
    return record


def create_user(
    workspace: Workspace,
    name: str,
    *,
    actor: str,
    kind: str = "user",
    email: str | None = None,
    password: str | None = None,
    passwords: Passwords | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Create an account; a service account has no password (it signs in with tokens).

    Raises:
        InvalidNameError: `name` is not a plain identifier.
        InvalidRequestError: an unknown kind, or a password for a service account.
        AlreadyExistsError: the name is taken.
    """
    validate_name(name, "account name")
    if kind not in KINDS:
        raise InvalidRequestError(f"Unknown account kind {kind!r}: use user or service.")
    if kind == "service" and password is not None:
        raise InvalidRequestError("A service account has no password: give it a token instead.")
    if password is not None and passwords is None:
        raise InvalidRequestError("A password needs the password hasher.")
    hashed = passwords.hash(password) if password is not None and passwords else None
    moment = now or datetime.now(UTC)
    with workspace.store.session() as session:
        if session.scalar(select(UserRecord.id).where(UserRecord.name == name)) is not None:
            raise AlreadyExistsError(f"An account called {name!r} exists already.")
        record = UserRecord(
            id=new_id(),
            name=name,
            kind=kind,
            email=email,
            password_hash=hashed,
            disabled=False,
            created_at=moment,
            created_by=actor,
            updated_at=moment,
        )
        session.add(record)
        audit.append(session, actor, "user.create", f"user:{name}", {"kind": kind})
    return user_summary(record)


def list_users(workspace: Workspace) -> list[dict[str, Any]]:
    """Every account, by name."""
    with workspace.store.session() as session:
        records = session.scalars(select(UserRecord).order_by(UserRecord.name)).all()
        return [user_summary(record) for record in records]


def get_user(workspace: Workspace, name: str) -> dict[str, Any]:
    """One account (NotFoundError when unknown)."""
    with workspace.store.session() as session:
        return user_summary(find_user(session, name))


def set_disabled(
    workspace: Workspace, name: str, disabled: bool, *, actor: str, now: datetime | None = None
) -> dict[str, Any]:
    """Disable an account (its tokens and sessions stop working at once) or enable it again.

    Raises:
        NotFoundError: no such account.
        LastOwnerError: disabling the last enabled owner of a project.
    """
    with workspace.store.session() as session:
        record = find_user(session, name)
        if disabled and not record.disabled:
            check_not_last_owner(session, record, f"disable {name}")
        if record.disabled != disabled:
            record.disabled = disabled
            record.updated_at = now or datetime.now(UTC)
            action = "user.disable" if disabled else "user.enable"
            audit.append(session, actor, action, f"user:{name}", {})
        return user_summary(record)


def check_not_last_owner(
    session: Session, user: UserRecord, change: str, project: str | None = None
) -> None:
    """Refuse `change` when `user` is the only enabled owner of `project` (None: of any
    project): nobody would be left to manage it. Two changes to two owners cannot both
    pass: the store runs one writing transaction at a time (`core.store`).

    Raises:
        LastOwnerError: `user` is the last enabled owner.
    """
    if user.disabled:
        return  # a disabled owner manages nothing already: the change loses no one
    owned = (
        select(ProjectRecord)
        .join(MembershipRecord, MembershipRecord.project_id == ProjectRecord.id)
        .where(MembershipRecord.user_id == user.id, MembershipRecord.role == "owner")
        .order_by(ProjectRecord.id)
    )
    if project is not None:
        owned = owned.where(ProjectRecord.name == project)
    for record in session.scalars(owned).all():
        others = session.scalar(
            select(func.count())
            .select_from(MembershipRecord)
            .join(UserRecord, UserRecord.id == MembershipRecord.user_id)
            .where(
                MembershipRecord.project_id == record.id,
                MembershipRecord.role == "owner",
                MembershipRecord.user_id != user.id,
                UserRecord.disabled.is_(False),
            )
        )
        if not others:
            raise LastOwnerError(
                f"Cannot {change}: {user.name} is the last owner of the project "
                f"{record.name!r}; make someone else its owner first."
            )


def check_password(workspace: Workspace, name: str, password: str, passwords: Passwords) -> bool:
    """Whether `password` is account `name`'s (False for an unknown or password-less one)."""
    with workspace.store.session() as session:
        stored = session.scalar(select(UserRecord.password_hash).where(UserRecord.name == name))
    return passwords.verify(stored, password)


def set_password(
    workspace: Workspace,
    name: str,
    password: str,
    passwords: Passwords,
    *,
    actor: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Give a person's account a new password (its hash only is stored).

    Raises:
        NotFoundError: no such account.
        InvalidRequestError: it is a service account.
        UsageError: the password is too short or too long.
    """
    hashed = passwords.hash(password)
    with workspace.store.session() as session:
        record = find_user(session, name)
        if record.kind == "service":
            raise InvalidRequestError("A service account has no password: give it a token.")
        record.password_hash = hashed
        record.updated_at = now or datetime.now(UTC)
        audit.append(session, actor, "user.password", f"user:{name}", {})
        return user_summary(record)


def set_email(
    workspace: Workspace, name: str, email: str, *, actor: str, now: datetime | None = None
) -> dict[str, Any]:
    """Set an account's e-mail address (NotFoundError when unknown)."""
    with workspace.store.session() as session:
        record = find_user(session, name)
        if record.email != email:
            record.email = email
            record.updated_at = now or datetime.now(UTC)
            audit.append(session, actor, "user.email", f"user:{name}", {})
        return user_summary(record)


def find_or_create_external_user(
    workspace: Workspace,
    issuer: str,
    subject: str,
    *,
    name: str,
    email: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The account an OIDC identity (`issuer`, `subject`) signs in as, created at its first
    sign-in under `name` (or `name-2`, `name-3`... when taken). A disabled account is returned
    as it is: the caller refuses it.

    Raises:
        InvalidNameError: `name` is not a plain identifier.
    """
    validate_name(name, "account name")
    moment = now or datetime.now(UTC)
    with workspace.store.session() as session:
        record = session.scalar(
            select(UserRecord).where(
                UserRecord.external_issuer == issuer, UserRecord.external_subject == subject
            )
        )
        if record is None:
            taken = set(
                session.scalars(select(UserRecord.name).where(UserRecord.name.startswith(name)))
            )
            chosen, n = name, 1
            while chosen in taken:
                n += 1
                chosen = f"{name}-{n}"
            record = UserRecord(
                id=new_id(),
                name=chosen,
                kind="user",
                email=email,
                password_hash=None,
                disabled=False,
                external_issuer=issuer,
                external_subject=subject,
                created_at=moment,
                created_by="oidc",
                updated_at=moment,
            )
            session.add(record)
            audit.append(session, chosen, "user.create", f"user:{chosen}", {"issuer": issuer})
        elif email and record.email != email:
            record.email = email
            record.updated_at = moment
        return user_summary(record)
