"""`forgeml pipelines list|show` in remote mode print what they print locally, on SQLite
and PostgreSQL; the commands that read a pipeline file of this machine refuse remote mode."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cli._served import (
    Forgeml,
    Served,
    assert_queued_as_job,
    assert_same_as_local,
    served_on,
)
from tests.pipelines.conftest import HELLO_PIPELINE

READS = [
    ("pipelines", "list"),
    ("pipelines", "list", "--json"),
    ("pipelines", "list", "--limit", "1", "--json"),
    ("pipelines", "show", "hello"),
    ("pipelines", "show", "{run}", "--json"),
    # the same sentence and exit code
    ("pipelines", "show", "nosuch"),
    ("pipelines", "list", "--limit", "0"),
]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    from forgeml.pipelines import load_pipeline, run_pipeline

    with served_on(request.param, tmp_path_factory) as home:
        spec = tmp_path_factory.mktemp("pipeline") / "hello.yaml"
        spec.write_text(HELLO_PIPELINE)
        for _ in range(2):  # the second run is served from the cache
            run_pipeline(home.workspace, load_pipeline(spec, []))
        yield home


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_remote_pipelines_print_what_local_prints(
    forgeml: Forgeml, command: tuple[str, ...]
) -> None:
    import json

    run = json.loads(forgeml("pipelines", "list", "--json").stdout)[-1]["id"]
    args = [arg.replace("{run}", run[:12]) for arg in command]
    local, remote = forgeml(*args), forgeml.remote(*args)

    assert_same_as_local(local, remote)
    if not local.code:
        assert local.stdout and not local.stderr


@pytest.mark.parametrize(
    "command",
    [("pipelines", "graph", "p.yaml"), ("pipelines", "export", "p.yaml", "--image", "f:1")],
)
def test_pipeline_files_are_read_where_they_are(forgeml: Forgeml, command: tuple[str, ...]) -> None:
    assert_same_as_local(forgeml(*command), forgeml.remote(*command))


def test_a_pipeline_run_runs_on_the_server_as_a_job(forgeml: Forgeml) -> None:
    assert_queued_as_job(forgeml, ("pipelines", "run", "nosuch.yaml"))


def test_pipeline_triggers_run_on_the_server_as_jobs(forgeml: Forgeml) -> None:
    assert_queued_as_job(forgeml, ("pipelines", "trigger", "list"))
