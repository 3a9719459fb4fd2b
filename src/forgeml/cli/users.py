"""`forgeml users create|list|show|disable|enable|password`: people and service accounts."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalUsers

app = typer.Typer(
    help="Accounts: people (password or OIDC) and service accounts (tokens).",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _users() -> Any:
    return source(lambda client: client.users, LocalUsers)


def _read_password(from_stdin: bool) -> str | None:
    """The password: stdin's first line with --password-stdin, else asked on a terminal."""
    from forgeml.core.errors import UsageError

    if from_stdin:
        line = sys.stdin.readline().rstrip("\r\n")
        if not line:
            raise UsageError("--password-stdin read no password from stdin.")
        return line
    if not sys.stdin.isatty():
        return None
    typed: str = typer.prompt("Password", hide_input=True, confirmation_prompt=True)
    return typed


@app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="The account's name.")],
    service: Annotated[
        bool, typer.Option("--service", help="A service account: tokens only, no password.")
    ] = False,
    email: Annotated[str | None, typer.Option(help="E-mail address.")] = None,
    role: Annotated[
        str | None,
        typer.Option(help="A role in --project: owner, admin, maintainer, developer, viewer."),
    ] = None,
    project: Annotated[str, typer.Option(help="The project --role is given in.")] = "default",
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from stdin's first line.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Create an account; a person's password is asked for (or read with --password-stdin)
    and only its Argon2id hash is kept."""
    from forgeml.auth.roles import check_role
    from forgeml.core.errors import UsageError

    if role is not None:
        check_role(role)
    if service and password_stdin:
        raise UsageError("A service account has no password: drop --password-stdin.")
    password = None if service else _read_password(password_stdin)
    summary = _users().create(
        name, kind="service" if service else "user", email=email, password=password,
        role=role, project=project,
    )  # fmt: skip
    if as_json:
        print_json(summary)
        return
    granted = f", {role} of {project}" if role else ""
    say(f"{summary['kind']} account {name} created{granted}")


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every account (never a password or its hash)."""
    users = _users().list()
    if as_json:
        print_json(users)
        return
    rows = [
        (
            u["name"], u["kind"], u["email"] or "-",
            "disabled" if u["disabled"] else "active",
            "password" if u["has_password"] else ("oidc" if u["external"] else "-"),
        )
        for u in users
    ]  # fmt: skip
    print_table("Accounts", ["name", "kind", "email", "state", "sign-in"], rows)


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The account's name.")], as_json: JsonFlag = False
) -> None:
    """One account and its role in each project."""
    summary = _users().show(name)
    if as_json:
        print_json(summary)
        return
    state = "disabled" if summary["disabled"] else "active"
    say(f"{summary['kind']} account {name} ({state}), created by {summary['created_by']}")
    rows = sorted(summary["roles"].items())
    print_table("Roles", ["project", "role"], rows)


def _set_disabled(name: str, disabled: bool, as_json: bool) -> None:
    summary = _users().update(name, disabled=disabled)
    if as_json:
        print_json(summary)
        return
    say(f"account {name} {'disabled' if disabled else 'enabled'}")


@app.command("disable")
def disable(
    name: Annotated[str, typer.Argument(help="The account's name.")], as_json: JsonFlag = False
) -> None:
    """Disable an account: its tokens and sessions are refused at once."""
    _set_disabled(name, True, as_json)


@app.command("enable")
def enable(
    name: Annotated[str, typer.Argument(help="The account's name.")], as_json: JsonFlag = False
) -> None:
    """Enable a disabled account again (its unexpired, unrevoked tokens work again)."""
    _set_disabled(name, False, as_json)


@app.command("password")
def password(
    name: Annotated[str, typer.Argument(help="The person's account name.")],
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from stdin's first line.")
    ] = False,
) -> None:
    """Set a person's password (asked for, or read with --password-stdin); only its hash
    is kept."""
    from forgeml.core.errors import UsageError

    chosen = _read_password(password_stdin)
    if chosen is None:
        raise UsageError("No password given: type it on a terminal or use --password-stdin.")
    _users().update(name, password=chosen)
    say(f"password of {name} set")
