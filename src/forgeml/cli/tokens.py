"""`forgeml tokens create|list|revoke`: API tokens for the control plane."""

from __future__ import annotations

from contextlib import closing
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import source

if TYPE_CHECKING:
    from forgeml.core.workspace import Workspace

app = typer.Typer(
    help="API tokens: prefixed, stored hashed, scoped, expiring, revocable.",
    no_args_is_help=True,
)
# a list of answers; named so the `list` methods do not shadow the type in their classes
Items = list[dict[str, Any]]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _workspace() -> Workspace:
    from forgeml.core.workspace import open_workspace

    return open_workspace()


class _LocalTokens:
    """The local workspace's tokens, as `forgeml.client.Tokens` answers them remotely."""

    def create(
        self, user: str, name: str, scopes: list[str] | None, expires_days: float | None
    ) -> dict[str, Any]:
        from forgeml.auth import issue_token

        with closing(_workspace()) as workspace:
            expires = timedelta(days=expires_days) if expires_days is not None else None
            summary, token = issue_token(
                workspace, user, name, actor=workspace.actor, scopes=scopes, expires_in=expires
            )
            return summary | {"token": token}

    def list(self, user: str | None = None) -> Items:
        from forgeml.auth import list_tokens

        with closing(_workspace()) as workspace:
            return list_tokens(workspace, user)

    def revoke(self, token: str) -> dict[str, Any]:
        from forgeml.auth import revoke_token

        with closing(_workspace()) as workspace:
            return revoke_token(workspace, token, actor=workspace.actor)


def _tokens() -> Any:
    return source(lambda client: client.tokens, _LocalTokens)


@app.command("create")
def create(
    user: Annotated[str, typer.Option("--user", help="The account the token acts as.")],
    name: Annotated[str, typer.Option("--name", help="A label for people.")],
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="A permission it is limited to (repeat; default all)."),
    ] = None,
    expires_days: Annotated[
        float | None, typer.Option(help="Days until it expires (default never).", min=0.001)
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a token and print it ONCE: only a hash of it is kept."""
    summary = _tokens().create(user, name, scope, expires_days)
    token = summary["token"]
    if as_json:
        print_json(summary)
        return
    scopes = ", ".join(summary["scopes"]) if summary["scopes"] else f"all of {user}'s roles"
    say(f"token {summary['prefix']} created for {user} ({scopes})")
    say("Store it now; it is not shown again:")
    typer.echo(token)


def _moment(value: Any) -> str:
    # a datetime locally, its ISO 8601 string in remote mode: printed alike
    return when(value) if value else "never"


@app.command("list")
def list_(
    user: Annotated[str | None, typer.Option("--user", help="Only this account's.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """API tokens (prefix, account, scope, expiry, last use, state); never a secret."""
    tokens = _tokens().list(user)
    if as_json:
        print_json(tokens)
        return
    rows = [
        (
            t["prefix"], t["user"], t["name"],
            ", ".join(t["scopes"]) if t["scopes"] else "all",
            _moment(t["expires_at"]), _moment(t["last_used_at"]),
            "revoked" if t["revoked_at"] else "active",
        )
        for t in tokens
    ]  # fmt: skip
    columns = ["prefix", "user", "name", "scope", "expires", "last used", "state"]
    print_table("Tokens", columns, rows)


@app.command("revoke")
def revoke(
    token: Annotated[str, typer.Argument(help="The token's prefix (fmlt_<id>) or id.")],
    as_json: JsonFlag = False,
) -> None:
    """Revoke a token: it is refused from the next request on."""
    summary = _tokens().revoke(token)
    if as_json:
        print_json(summary)
        return
    say(f"token {summary['prefix']} revoked")
