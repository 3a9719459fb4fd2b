"""The prompt registry: immutable versions, aliases as for models, audited.

A version is content-addressed: creating a prompt whose content is already a version of
it returns that version. References read as models' do: `NAME` (latest), `NAME@vN`,
`NAME@ALIAS` and `NAME@<digest prefix>`. Every new version and every alias move appends
an audit event in the transaction that writes it.

A prompt belongs to the project it was created in (`Workspace.project`); its name stays
unique across projects. A list shows the workspace's project's prompts; an item is found by
name (the API authorizes it in its own project); what changes one (a new version, an alias,
a split) or uses one (`get_prompt`: the gateway, agents, `rag answer`, `prompts eval`) must
act in its project.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from forgeml.core.configfile import parse_model
from forgeml.core.errors import AlreadyExistsError, NotFoundError, UsageError
from forgeml.core.ids import new_id, validate_alias, validate_name
from forgeml.core.store import PromptAliasRecord, PromptVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.prompts.spec import CheckedPrompt, PromptSpec, Rendered, checked

_VERSION = re.compile(r"^v(\d+)$")
_ALIAS = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_HEX = re.compile(r"^[0-9a-f]{4,64}$")


@dataclass(frozen=True)
class PromptVersion:
    """A stored version, its spec, and the aliases pointing at it."""

    record: PromptVersionRecord
    spec: PromptSpec
    aliases: list[str]

    @property
    def ref(self) -> str:
        return self.record.ref

    def checked(self) -> CheckedPrompt:
        """The spec compiled in the sandbox (checked again: stored rows are not trusted)."""
        return checked(self.spec, self.ref)


def create_prompt(workspace: Workspace, name: str, spec: PromptSpec) -> tuple[PromptVersion, bool]:
    """Store `spec` as the next version of `name`, unless it is one already.

    Returns:
        The version, and whether it is new (False: identical content existed).

    Raises:
        InvalidNameError: `name` is not a plain identifier.
        AlreadyExistsError: a prompt of another project has that name.
        PromptTemplateError: a template is unsafe or broken (nothing is written).
        InvalidDataError: an example does not fit the declared variables.
    """
    validate_name(name, "prompt name")
    checked(spec, name)
    digest = spec.digest()
    with workspace.store.session() as session:
        _refuse_other_project(session, workspace, name)
        existing = session.scalars(
            select(PromptVersionRecord).where(
                PromptVersionRecord.name == name, PromptVersionRecord.digest == digest
            )
        ).first()
        if existing is not None:
            return _version(session, existing), False
        last = session.scalar(
            select(func.max(PromptVersionRecord.version)).where(PromptVersionRecord.name == name)
        )
        record = PromptVersionRecord(
            id=new_id(),
            name=name,
            project=workspace.project,
            version=(last or 0) + 1,
            digest=digest,
            kind=spec.kind,
            content=spec.model_dump(mode="json"),
            created_by=workspace.actor,
            created_at=datetime.now(UTC),
        )
        session.add(record)
        session.flush()
        workspace.audit(session, "prompt.create", record.ref, {"digest": digest})
        return PromptVersion(record, spec, []), True


def _refuse_other_project(session: Session, workspace: Workspace, name: str) -> None:
    found = session.scalar(
        select(PromptVersionRecord.project).where(PromptVersionRecord.name == name).limit(1)
    )
    if found is not None and found != workspace.project:
        # names stay unique across projects: a version goes to its prompt's own project
        raise AlreadyExistsError(
            f"A prompt called {name!r} exists already, in the project {found!r}; pick another name."
        )


def get_prompt(workspace: Workspace, ref: str) -> PromptVersion:
    """The version `ref` names, of a prompt of the workspace's project: what a use of it
    (the gateway, an agent's system prompt, `rag answer`, `prompts eval`) reads.

    Raises:
        NotFoundError: no such prompt, version or alias.
        UsageError: the reference is malformed, or a digest prefix is ambiguous.
        OtherProjectError: the prompt belongs to another project.
    """
    version = find_prompt(workspace, ref)
    workspace.check_own("Prompt", version.record.name, version.record.project)
    return version


def find_prompt(workspace: Workspace, ref: str) -> PromptVersion:
    """The version `ref` names: `NAME`, `NAME@vN`, `NAME@ALIAS` or `NAME@<digest prefix>`,
    in whichever project (an item read: the API authorizes it in the prompt's project).

    Raises:
        NotFoundError: no such prompt, version or alias.
        UsageError: the reference is malformed, or a digest prefix is ambiguous.
    """
    with workspace.store.session() as session:
        return _version(session, _resolve(session, ref))


def list_prompts(workspace: Workspace) -> list[PromptVersion]:
    """The latest version of every prompt of the workspace's project, by name."""
    with workspace.store.session() as session:
        latest = (
            select(PromptVersionRecord.name, func.max(PromptVersionRecord.version).label("v"))
            .where(PromptVersionRecord.project == workspace.project)
            .group_by(PromptVersionRecord.name)
            .subquery()
        )
        records = session.scalars(
            select(PromptVersionRecord)
            .join(
                latest,
                (PromptVersionRecord.name == latest.c.name)
                & (PromptVersionRecord.version == latest.c.v),
            )
            .order_by(PromptVersionRecord.name)
        )
        return [_version(session, record) for record in records]


def prompt_versions(workspace: Workspace, name: str) -> list[PromptVersion]:
    """Every version of prompt `name`, oldest first.

    Raises:
        NotFoundError: no prompt is called `name`.
    """
    validate_name(name, "prompt name")
    with workspace.store.session() as session:
        records = records_of(session, name)
        return [_version(session, record) for record in records]


def set_alias(workspace: Workspace, ref: str, alias: str) -> PromptVersion:
    """Point `NAME@alias` at the version `ref` names (moving it if it pointed elsewhere).

    Raises:
        UsageError: the alias is malformed, `latest` or looks like a version number.
        NotFoundError: `ref` names no version.
        OtherProjectError: the prompt belongs to another project.
    """
    validate_alias(alias, max_length=128)  # prompt_aliases.alias
    with workspace.store.session() as session:
        record = _resolve(session, ref)
        workspace.check_own("Prompt", record.name, record.project)
        row = session.get(PromptAliasRecord, (record.name, alias))
        previous = row.version if row else None
        if row is None:
            row = PromptAliasRecord(name=record.name, alias=alias, version=record.version)
            session.add(row)
        row.version, row.updated_at = record.version, datetime.now(UTC)
        session.flush()
        payload = {"alias": alias, "previous": previous}
        workspace.audit(session, "prompt.alias", record.ref, payload)
        return _version(session, record)


def render_prompt(
    workspace: Workspace, ref: str, values: Mapping[str, Any], *, as_text: bool = False
) -> tuple[PromptVersion, Rendered]:
    """The version `ref` names and its text or chat messages for `values`.

    Raises:
        NotFoundError: no such prompt.
        InvalidDataError: an unknown or missing variable, or a value of the wrong type.
        PromptTemplateError: the sandbox refused the render or a limit was reached.
    """
    version = find_prompt(workspace, ref)
    return version, version.checked().render(values, version.ref, as_text=as_text)


def records_of(session: Session, name: str) -> list[PromptVersionRecord]:
    """Every version of prompt `name`, oldest first (NotFoundError: none)."""
    records = list(
        session.scalars(
            select(PromptVersionRecord)
            .where(PromptVersionRecord.name == name)
            .order_by(PromptVersionRecord.version)
        )
    )
    if not records:
        raise NotFoundError(f"Prompt '{name}' does not exist (see `forgeml prompts list`).")
    return records


def _resolve(session: Session, ref: str) -> PromptVersionRecord:
    name, sep, selector = ref.partition("@")
    validate_name(name, "prompt name")
    records = records_of(session, name)
    if not sep or selector == "latest":
        return records[-1]
    if match := _VERSION.match(selector):
        return _pick(records, int(match.group(1)), name)
    if not _ALIAS.match(selector):
        raise UsageError(
            f"Invalid prompt reference '{ref}': after '@' give vN, an alias or a digest prefix."
        )
    if alias := session.get(PromptAliasRecord, (name, selector)):
        return _pick(records, alias.version, name)
    found = [r for r in records if _HEX.match(selector) and r.digest.startswith(selector)]
    if len(found) > 1:
        raise UsageError(
            f"Digest prefix '{selector}' matches {len(found)} versions of prompt '{name}'; "
            "give more characters."
        )
    if found:
        return found[0]
    known = ", ".join(sorted(aliases_of(session, name))) or "none"
    raise NotFoundError(f"Prompt '{name}' has no alias '{selector}' (its aliases: {known}).")


def _pick(records: list[PromptVersionRecord], number: int, name: str) -> PromptVersionRecord:
    for record in records:
        if record.version == number:
            return record
    raise NotFoundError(
        f"Prompt '{name}' has no version v{number} (its versions are v1..v{records[-1].version})."
    )


def aliases_of(session: Session, name: str) -> dict[str, int]:
    """Prompt `name`'s aliases and the version number each points at."""
    rows = session.scalars(select(PromptAliasRecord).where(PromptAliasRecord.name == name))
    return {row.alias: row.version for row in rows}


def _version(session: Session, record: PromptVersionRecord) -> PromptVersion:
    aliases = sorted(a for a, v in aliases_of(session, record.name).items() if v == record.version)
    spec = parse_model(PromptSpec, record.content, f"prompt {record.ref}")
    return PromptVersion(record, spec, aliases)


def prompt_summary(version: PromptVersion) -> dict[str, Any]:
    """A version as `prompts list|versions --json` print it."""
    record = version.record
    return {
        "ref": record.ref,
        "name": record.name,
        "version": record.version,
        "kind": record.kind,
        "digest": record.digest,
        "project": record.project,
        "aliases": version.aliases,
        "description": version.spec.description,
        "variables": [variable.name for variable in version.spec.variables],
        "created_by": record.created_by,
        "created_at": record.created_at,
    }


def prompt_detail(workspace: Workspace, ref: str) -> dict[str, Any]:
    """What `prompts show --json` prints: the summary, the prompt's split and the content."""
    from forgeml.prompts.split import get_split

    version = find_prompt(workspace, ref)
    split = get_split(workspace, version.record.name)
    return {
        **prompt_summary(version),
        "split": split and split.as_dict(),
        "content": version.spec.model_dump(mode="json"),
    }
