"""`forgeml tokens create|list|revoke`: API tokens for the control plane."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say, when
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalTokens

app = typer.Typer(
    help="API tokens: prefixed, stored hashed, scoped, expiring, revocable.",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _tokens() -> Any:
    return source(lambda client: client.tokens, LocalTokens)


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
