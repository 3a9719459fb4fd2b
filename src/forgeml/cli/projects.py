"""`forgeml projects create|list|members|add-member|remove-member`: projects and roles."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalProjects

app = typer.Typer(help="Projects and the role each account holds in them.", no_args_is_help=True)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
Project = Annotated[str, typer.Argument(help="The project's name.")]
User = Annotated[str, typer.Argument(help="The account's name.")]


def _projects() -> Any:
    return source(lambda client: client.projects, LocalProjects)


@app.command("create")
def create(
    name: Project,
    owner: Annotated[str | None, typer.Option(help="An account to make its owner.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a project (in remote mode the caller becomes an owner of it too)."""
    summary = _projects().create(name, owner)
    if as_json:
        print_json(summary)
        return
    say(f"project {name} created" + (f", owned by {owner}" if owner else ""))


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every project and its number of members."""
    projects = _projects().list()
    if as_json:
        print_json(projects)
        return
    rows = [(p["name"], p["members"], p["created_by"], when(p["created_at"])) for p in projects]
    print_table("Projects", ["name", "members", "created by", "created at"], rows)


@app.command("members")
def members(project: Project, as_json: JsonFlag = False) -> None:
    """A project's members and their roles."""
    found = _projects().members(project)
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
    summary = _projects().add_member(project, user, role)
    if as_json:
        print_json(summary)
        return
    say(f"{user} is {role} of {project}")


@app.command("remove-member")
def remove_member(project: Project, user: User, as_json: JsonFlag = False) -> None:
    """Take an account's role in a project away."""
    summary = _projects().remove_member(project, user)
    if as_json:
        print_json(summary)
        return
    say(f"{user} is no longer {summary['removed']} of {project}")
