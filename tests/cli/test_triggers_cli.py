from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from forgeml.core.workspace import Workspace
from forgeml.pipelines.triggers import evaluate_triggers
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.pipelines.conftest import row_counts, write_pipeline

PIPELINE = """
name: tiny
params:
  greeting: hello
steps:
  - name: write
    kind: command
    argv: [PYTHON, -c, "open('out.txt', 'w').write('${params.greeting}')"]
    outputs: {text: out.txt}
"""


def test_add_list_firings_and_remove(
    cli: Any, tmp_path: Path, home_workspace: Workspace, small_csv: Path
) -> None:
    path = write_pipeline(tmp_path, PIPELINE)
    assert_ok(cli("data", "add", "small", small_csv))

    nightly = json_out(cli("pipelines", "trigger", "add", "nightly", path, "--cron", "0 3 * * *",
                           "--json"))  # fmt: skip
    assert (nightly["name"], nightly["kind"], nightly["on"]) == ("nightly", "cron", "0 3 * * *")
    added = cli("pipelines", "trigger", "add", "fresh", path, "--on-dataset", "small",
                "--set", "params.greeting=hi")  # fmt: skip
    assert_ok(added)

    triggers = json_out(cli("pipelines", "trigger", "list", "--json"))
    assert [(t["name"], t["kind"], t["on"]) for t in triggers] == [
        ("fresh", "dataset", "small"),
        ("nightly", "cron", "0 3 * * *"),
    ]
    assert triggers[0]["overrides"] == ["params.greeting=hi"]
    assert triggers[0]["file"] == str(path.resolve()) and triggers[0]["cursor"] == "1"
    human = cli("pipelines", "trigger", "list")
    assert human.code == 0 and "nightly" in human.stdout

    later = datetime.fromisoformat(triggers[1]["cursor"]) + timedelta(days=1)  # one 03:00
    fired = evaluate_triggers(home_workspace, later, submit=lambda _w, _f: "job1")
    assert [f.trigger for f in fired] == ["nightly"]
    firings = json_out(cli("pipelines", "trigger", "firings", "nightly", "--json"))
    assert [(f["trigger"], f["job_id"]) for f in firings] == [("nightly", "job1")]
    assert json_out(cli("pipelines", "trigger", "firings", "fresh", "--json")) == []
    assert "nightly" in cli("pipelines", "trigger", "firings").stdout

    assert_ok(cli("pipelines", "trigger", "remove", "nightly"))
    names = [t["name"] for t in json_out(cli("pipelines", "trigger", "list", "--json"))]
    assert names == ["fresh"]


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (["--cron", "not cron"], "'not cron' is not a cron expression", 1),
        (["--on-dataset", "nowhere"], "Dataset 'nowhere' does not exist", 1),
        ([], "exactly one of --cron EXPR, --on-dataset NAME, --on-alert RULE", 2),
        (["--cron", "* * * * *", "--set", "oops"], "--set 'oops' is not of the form", 2),
    ],
)
def test_bad_trigger_input_is_one_sentence_and_records_nothing(
    cli: Any,
    tmp_path: Path,
    home_workspace: Workspace,
    args: list[str],
    expected: str,
    code: int,
) -> None:
    path = write_pipeline(tmp_path, PIPELINE)
    before = row_counts(home_workspace)

    assert_cli_error(cli("pipelines", "trigger", "add", "t", path, *args), expected, code)

    assert row_counts(home_workspace) == before
    assert json_out(cli("pipelines", "trigger", "list", "--json")) == []


def test_missing_file_duplicate_and_unknown_names_are_one_sentence(
    cli: Any, tmp_path: Path
) -> None:
    path = write_pipeline(tmp_path, PIPELINE)
    missing = cli("pipelines", "trigger", "add", "t", tmp_path / "nope.yaml", "--cron", "* * * * *")
    assert_cli_error(missing, "nope.yaml")
    assert_ok(cli("pipelines", "trigger", "add", "t", path, "--cron", "* * * * *"))

    twice = cli("pipelines", "trigger", "add", "t", path, "--cron", "* * * * *")
    assert_cli_error(twice, "Trigger 't' exists already")
    assert_cli_error(cli("pipelines", "trigger", "remove", "other"), "There is no trigger 'other'")
    assert_cli_error(cli("pipelines", "trigger", "firings", "other"), "There is no trigger")
