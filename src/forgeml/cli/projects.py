"""`forgeml projects create|list|members|add-member|remove-member`: projects and roles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from forgeml.cli._output import print_json, print_table, say

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

app = typer.Typer(help="Projects and the role each account holds in them.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
Project = Annotated[str, typer.Argument(help="The project's name.")]
User = Annotated[str, typer.Argument(help="The account's name.")]


def _workspace() -> Workspace:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


@app.command("create")
def create(
    name: Project,
    owner: Annotated[str | None, typer.Option(help="An account to make its owner.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a project."""
    from forgeml.auth import create_project

    workspace = _workspace()
    summary = create_project(workspace, name, actor=workspace.actor, owner=owner)
    if as_json:
        print_json(summary)
        return
    say(f"project {name} created" + (f", owned by {owner}" if owner else ""))


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every project and its number of members."""
    from forgeml.auth import list_projects

    projects = list_projects(_workspace())
    if as_json:
        print_json(projects)
        return
    rows = [(p["name"], p["members"], p["created_by"], p["created_at"]) for p in projects]
    print_table("Projects", ["name", "members", "created by", "created at"], rows)


@app.command("members")
def members(project: Project, as_json: JsonFlag = False) -> None:
    """A project's members and their roles."""
    from forgeml.auth import list_members

    found = list_members(_workspace(), project)
    if as_json:
        print_json(found)
        return
    rows = [(m["user"], m["kind"], m["role"], m["source"], m["granted_by"]) for m in found]
    print_table(f"Members of {project}", ["user", "kind", "role", "source", "granted by"], rows)


@app.command("add-member")
def add_member(
    project: Project,
    user: User,
    role: Annotated[str, typer.Option(help="owner, admin, maintainer, developer or viewer.")],
    as_json: JsonFlag = False,
) -> None:
    """Give an account a role in a project (replacing the one it held there)."""
    from forgeml.auth import add_member as grant

    workspace = _workspace()
    summary = grant(workspace, project, user, role, actor=workspace.actor)
    if as_json:
        print_json(summary)
        return
    say(f"{user} is {role} of {project}")


@app.command("remove-member")
def remove_member(project: Project, user: User, as_json: JsonFlag = False) -> None:
    """Take an account's role in a project away."""
    from forgeml.auth import remove_member as take

    workspace = _workspace()
    summary = take(workspace, project, user, actor=workspace.actor)
    if as_json:
        print_json(summary)
        return
    say(f"{user} is no longer {summary['removed']} of {project}")
