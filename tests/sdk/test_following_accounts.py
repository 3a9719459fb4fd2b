"""`forgeml.sdk`'s users, projects and tokens follow FORGEML_SERVER: each change made
through the server, then repeated on both sides, answers alike (often the same error: the
state the first made), and each read answers alike (issue 15)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from forgeml import sdk
from tests.cli._served import Served, served_on
from tests.sdk._sides import Call, Sides

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_on("sqlite", tmp_path_factory) as home:
        yield home


CHANGES: dict[str, Call] = {
    "users.create ci": lambda: sdk.users.create("ci", kind="service", role="developer"),
    "users.create bot": lambda: sdk.users.create("bot", kind="service"),
    "users.update disable": lambda: sdk.users.update("bot", disabled=True),
    "users.update enable": lambda: sdk.users.update("bot", disabled=False),
    "users.update email": lambda: sdk.users.update("ci", email="ci@example.com"),
    "projects.create": lambda: sdk.projects.create("vision"),
    "projects.add_member": lambda: sdk.projects.add_member("vision", "ci", "maintainer"),
    "projects.add_member bot": lambda: sdk.projects.add_member("vision", "bot", "viewer"),
    "projects.remove_member": lambda: sdk.projects.remove_member("vision", "bot"),
}

READS: dict[str, Call] = {
    "users.list": sdk.users.list,
    "users.show": lambda: sdk.users.show("ci"),
    "users.show missing": lambda: sdk.users.show("nosuch"),
    "users.create bad role": lambda: sdk.users.create("x", kind="service", role="emperor"),
    "projects.list": sdk.projects.list,
    "projects.members": lambda: sdk.projects.members("vision"),
    "projects.members default": lambda: sdk.projects.members("default"),
    "projects.remove_member last owner": lambda: sdk.projects.remove_member("default", "olivia"),
    "projects.add_member missing": lambda: sdk.projects.add_member("vision", "nosuch", "viewer"),
    "tokens.list missing": lambda: sdk.tokens.list("nosuch"),
    "tokens.revoke missing": lambda: sdk.tokens.revoke("fmlt_nosuch"),
}


def test_account_changes_then_reads_answer_alike(sides: Sides) -> None:
    for name, change in CHANGES.items():
        first = sides.remote(change)
        assert isinstance(first, dict), (name, first)
        assert sides.remote(change) == sides.local(change), name
    for name, read in READS.items():
        local = sides.local(read)
        assert sides.remote(read) == local, name
        assert local not in ([], {}, None), name
    # the bad role was refused before an account was made, on either side
    assert sides.local(lambda: sdk.users.show("x"))[0] == "NotFoundError"


def _fields(answer: dict[str, Any], *own: str) -> dict[str, Any]:
    # what each side's account or token holds of its own: its name, id, secret and times
    return {k: v for k, v in answer.items() if k not in {"name", "id", "created_at", *own}}


def test_an_account_made_on_either_side_answers_alike(sides: Sides) -> None:
    made = [
        side(lambda n=side.__name__: sdk.users.create(f"svc-{n}", kind="service", role="viewer"))
        for side in (sides.local, sides.remote)
    ]

    assert _fields(made[1]) == _fields(made[0])
    assert made[0]["roles"] == {"default": "viewer"} and made[0]["kind"] == "service"
    for account in ("svc-local", "svc-remote"):
        read = lambda a=account: sdk.users.show(a)  # noqa: E731
        assert sides.remote(read) == sides.local(read)


def test_a_token_is_created_listed_and_revoked_alike(sides: Sides) -> None:
    assert sides.remote(lambda: sdk.users.create("deployer", kind="service"))["name"]
    made = [
        side(lambda n=side.__name__: sdk.tokens.create("deployer", f"ci-{n}", ["models:read"]))
        for side in (sides.local, sides.remote)
    ]

    own = ("prefix", "token", "expires_at")
    assert _fields(made[1], *own) == _fields(made[0], *own)
    assert made[1]["token"].startswith(made[1]["prefix"] + "_") and made[1]["user"] == "deployer"
    listed = lambda: sdk.tokens.list("deployer")  # noqa: E731
    assert sides.remote(listed) == sides.local(listed)
    assert len(sides.local(listed)) == 2
    revoked = sides.remote(lambda: sdk.tokens.revoke(made[0]["prefix"]))
    assert revoked["revoked_at"] is not None
    # revoked already: the same error on both sides
    again = lambda: sdk.tokens.revoke(made[0]["prefix"])  # noqa: E731
    assert sides.remote(again) == sides.local(again)
    assert sides.local(again)[0] == "KeyStateError"


def test_every_token_lists_alike_but_the_callers_own(sides: Sides) -> None:
    # olivia's own token is used (and stamped) by the remote call: compare the others
    def others() -> list[dict[str, Any]]:
        return [t for t in sdk.tokens.list() if t["user"] != "olivia"]

    assert sides.remote(others) == sides.local(others)
    assert {t["user"] for t in sides.local(sdk.tokens.list)} >= {"olivia", "victor"}


def test_a_password_set_on_either_side_answers_alike(sides: Sides) -> None:
    change = lambda: sdk.users.update("victor", password="a new long password")  # noqa: E731

    remote, local = sides.remote(change), sides.local(change)

    assert _fields(remote, "updated_at") == _fields(local, "updated_at")
    assert remote["has_password"] is True
