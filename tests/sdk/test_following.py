"""`forgeml.sdk` follows FORGEML_SERVER: every resource's answer through the in-process
server equals the local workspace's, value for value (issue 15); a method one side lacks is
refused in one sentence."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from forgeml import sdk
from forgeml.core.errors import ConfigError, UsageError
from forgeml.sdk._seam import Following
from forgeml.sdk.local import LocalRuns
from tests.client._remote_home import RemoteHome, remote_home
from tests.data.conftest import write_table_csv
from tests.sdk._sides import Call, Sides

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RemoteHome]:
    """The trained Adult workspace (runs, models, datasets, a queued job), served."""
    with remote_home(tmp_path_factory, "sqlite") as home:
        yield home


def _first_run() -> str:
    return str(sdk.runs.list()[0]["run_id"])


READS: dict[str, Call] = {
    "runs.list": sdk.runs.list,
    "runs.list name": lambda: sdk.runs.list("adult-mlp"),
    "runs.show": lambda: sdk.runs.show(_first_run()),
    "runs.metrics": lambda: sdk.runs.metrics(_first_run()),
    "runs.show missing": lambda: sdk.runs.show("nosuch"),
    "models.list": sdk.models.list,
    "models.show alias": lambda: sdk.models.show("adult-mlp@production"),
    "models.show missing": lambda: sdk.models.show("adult-mlp@v99"),
    "datasets.list": sdk.datasets.list,
    "datasets.versions": lambda: sdk.datasets.versions("adult"),
    "datasets.show": lambda: sdk.datasets.show("adult@v2"),
    "datasets.diff": lambda: sdk.datasets.diff("adult@v1", "adult@v2"),
    "datasets.query": lambda: sdk.datasets.query(
        'SELECT "Y", count(*) AS n FROM adult GROUP BY 1 ORDER BY 1'
    ),
    "datasets.query refused": lambda: sdk.datasets.query("DROP TABLE adult"),
    "datasets.rebuild": lambda: sdk.datasets.rebuild("adult@v2"),
    "datasets.show missing": lambda: sdk.datasets.show("adult@v99"),
    "jobs.list": sdk.jobs.list,
    "jobs.list pending": lambda: sdk.jobs.list(states=["PENDING"], limit=5),
    "jobs.show missing": lambda: sdk.jobs.show("nosuch"),
    "queues.list": sdk.queues.list,
    "queues.show": lambda: sdk.queues.show("default"),
    "audit.latest": lambda: sdk.audit.latest(5),
    "audit.verify": sdk.audit.verify,
}


@pytest.mark.parametrize("name", list(READS))
def test_a_read_answers_the_same_locally_and_through_the_server(sides: Sides, name: str) -> None:
    local = sides.local(READS[name])
    remote = sides.remote(READS[name])

    assert remote == local
    assert local not in ([], {}, None), "the comparison must be over something"


def test_a_frame_reads_the_same_rows_through_the_server(sides: Sides) -> None:
    local_ref, local_rows = sides.local(lambda: sdk.datasets.frame("adult@v4", "test", 25))
    remote_ref, remote_rows = sides.remote(lambda: sdk.datasets.frame("adult@v4", "test", 25))

    assert remote_ref == local_ref == "adult@v4"
    assert remote_rows.height == 25
    assert remote_rows.equals(local_rows)


def test_writes_through_either_side_read_back_the_same_on_both(
    sides: Sides, tmp_path: Path
) -> None:
    csv = write_table_csv(tmp_path / "small.csv")
    uploaded = sides.remote(lambda: sdk.datasets.upload("sdk-small", csv))
    added = sides.local(lambda: sdk.datasets.upload("sdk-small", csv))
    # content-addressed: the same bytes are the same version, whichever side added them
    assert added["ref"] == uploaded["ref"] == "sdk-small@v1"
    spec = {"template": "Hello {{ name }}.", "variables": [{"name": "name"}]}
    created = [
        side(lambda: sdk.prompts.create("sdk-greet", spec)) for side in (sides.remote, sides.local)
    ]
    assert [answer["created"] for answer in created] == [True, False], created
    submitted = {
        side.__name__: side(lambda n=side.__name__: sdk.jobs.submit(["true"], name=f"sdk-{n}"))
        for side in (sides.local, sides.remote)
    }

    for read in (
        lambda: sdk.datasets.show("sdk-small"),
        lambda: sdk.prompts.render("sdk-greet", {"name": "Ada"}),
        lambda: sdk.prompts.render("sdk-greet", {}),
        sdk.prompts.list,
        lambda: sdk.jobs.show(submitted["local"]["job_id"]),
        lambda: sdk.jobs.show(submitted["remote"]["job_id"]),
        sdk.audit.verify,
    ):
        assert sides.remote(read) == sides.local(read)
    assert sides.local(lambda: sdk.prompts.render("sdk-greet", {"name": "Ada"}))["rendered"] == (
        "Hello Ada."
    )
    strip = ("job_id", "name", "submitted_at", "updated_at")
    assert {k: v for k, v in submitted["local"].items() if k not in strip} == {
        k: v for k, v in submitted["remote"].items() if k not in strip
    }


def test_a_method_without_a_local_side_is_refused_in_one_sentence(sides: Sides) -> None:
    sides.local(lambda: None)

    with pytest.raises(UsageError) as refused:
        sdk.runs.reproduce(_first_run())

    assert str(refused.value) == (
        "forgeml.sdk.runs.reproduce answers only through a server: set FORGEML_SERVER (and "
        "FORGEML_TOKEN) to call it, or run the matching `forgeml` command on this machine."
    )


def test_an_unknown_method_is_an_attribute_error(sides: Sides) -> None:
    with pytest.raises(AttributeError, match=r"^forgeml\.sdk\.models has no method 'shwo'$"):
        sdk.models.shwo("adult-mlp")  # type: ignore[attr-defined]


def test_a_bad_server_url_is_one_sentence(sides: Sides, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORGEML_SERVER", "ftp://example")

    with pytest.raises(ConfigError) as raised:
        sdk.models.list()

    assert "ftp://example" in str(raised.value) and "\n" not in str(raised.value)


class _RunsWithALocalOnlyMethod(LocalRuns):
    def tidy(self) -> str:
        return "tidied"


def test_a_method_without_a_remote_side_is_refused_in_one_sentence(sides: Sides) -> None:
    runs = Following("runs", "Runs", _RunsWithALocalOnlyMethod)
    assert sides.local(runs.tidy) == "tidied"

    refused = sides.remote(runs.tidy)

    assert refused == (
        "UsageError",
        "forgeml.sdk.runs.tidy has no remote mode: unset FORGEML_SERVER to run it on the local "
        "workspace, or call the API (/api/v1) directly.",
    )
