"""`forgeml keys create|list|revoke|usage`: API keys for the gateway, in FORGEML_PROJECT."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from forgeml.cli._output import print_json, print_table, say
from forgeml.cli._remote import source
from forgeml.sdk.local import LocalKeys

app = typer.Typer(
    help="API keys for the gateway, per project: stored as salted hashes, scoped to the "
    "project's deployments.",
    no_args_is_help=True,
)
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _limit(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


@app.command("create")
def create(
    name: Annotated[str, typer.Option("--name", help="A label for people.")],
    scope: Annotated[
        list[str] | None,
        typer.Option("--scope", help="A deployment the key may call (repeat; default: all)."),
    ] = None,
    rate: Annotated[float | None, typer.Option(help="Requests per second (token bucket).")] = None,
    burst: Annotated[int | None, typer.Option(help="Bucket size (default: the rate).")] = None,
    daily_quota: Annotated[int | None, typer.Option(help="Most requests per UTC day.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Create a key in the project and print it ONCE: only a salted hash of it is kept."""
    created = _keys().create(name, scope, rate, burst, daily_quota)
    if as_json:
        print_json(created)
        return
    say(f"key {created['prefix']} created for {', '.join(created['scopes'])}")
    say("Store it now; it is not shown again:")
    typer.echo(created["key"])


def _keys() -> Any:
    return source(lambda client: client.keys, LocalKeys)


@app.command("list")
def list_(as_json: JsonFlag = False) -> None:
    """Every key of the project (prefix, scopes, limits, state); never a secret or hash."""
    keys = _keys().list()
    if as_json:
        print_json(keys)
        return
    rows = [
        (
            k["prefix"],
            k["name"],
            ", ".join(k["scopes"]),
            _limit(k["rate_per_s"]),
            _limit(k["burst"]),
            _limit(k["daily_quota"]),
            "revoked" if k["revoked_at"] else "active",
        )
        for k in keys
    ]
    columns = ["prefix", "name", "scopes", "rate/s", "burst", "daily quota", "state"]
    print_table("API keys", columns, rows)


@app.command("revoke")
def revoke(
    key: Annotated[str, typer.Argument(help="The key's prefix or id.")],
    as_json: JsonFlag = False,
) -> None:
    """Revoke a key; running gateways refuse it within their key-cache TTL (5 s)."""
    summary = _keys().revoke(key)
    if as_json:
        print_json(summary)
        return
    say(f"key {summary['prefix']} revoked")


@app.command("usage")
def usage(
    since: Annotated[
        datetime | None, typer.Option(help="Only usage from this UTC time on.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Requests, errors and rejections per key of the project and deployment (flushed by the
    gateway)."""
    start = since.replace(tzinfo=since.tzinfo or UTC) if since else None
    rows = _keys().usage(start)
    if as_json:
        print_json(rows)
        return
    table = [
        (
            r["prefix"],
            r["name"],
            r["deployment"],
            r["requests"],
            r["errors"],
            r["rejected"],
            "-" if r["mean_latency_ms"] is None else f"{r['mean_latency_ms']:.2f}",
        )
        for r in rows
    ]
    columns = ["prefix", "name", "deployment", "requests", "errors", "rejected", "mean ms"]
    print_table("key usage", columns, table)
