"""`FORGEML_PROJECT` in local mode: what a command creates lands in that project, a list
shows that project's only, and without it everything stays in `default` as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from forgeml.core.config import Settings, get_settings
from forgeml.core.workspace import Workspace
from forgeml.tracking import RunStatus, finish_run, start_run
from tests.cli.conftest import assert_cli_error, assert_ok, json_out
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


def _in(monkeypatch: pytest.MonkeyPatch, project: str | None) -> None:
    if project is None:
        monkeypatch.delenv("FORGEML_PROJECT", raising=False)
    else:
        monkeypatch.setenv("FORGEML_PROJECT", project)
    get_settings.cache_clear()


def _datasets(cli: Cli) -> list[str]:
    return [item["dataset"] for item in json_out(cli("data", "list", "--json"))]


def test_each_project_lists_its_own_datasets(
    cli: Cli, small_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in(monkeypatch, None)
    assert_ok(cli("data", "add", "plain", small_csv))
    _in(monkeypatch, "team-a")
    assert_ok(cli("data", "add", "small-a", small_csv))

    assert _datasets(cli) == ["small-a"]
    # an item is found by name from any project (names are unique)
    assert json_out(cli("data", "show", "plain", "--json"))["ref"] == "plain@v1"
    _in(monkeypatch, "team-b")
    assert _datasets(cli) == []
    _in(monkeypatch, None)
    assert _datasets(cli) == ["plain"]


def test_each_project_lists_its_own_runs(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ids = {}
    for project in ("default", "team-a"):
        workspace = Workspace(Settings(home=tmp_path / "home", user="tester", project=project))
        handle = start_run(workspace, {"lr": 0.1}, "probe", None)
        finish_run(handle, RunStatus.FINISHED, {"accuracy": 0.5})
        ids[project] = handle.run_id
        workspace.close()

    _in(monkeypatch, "team-a")
    assert [run["run_id"] for run in json_out(cli("runs", "list", "--json"))] == [ids["team-a"]]
    _in(monkeypatch, None)
    assert [run["run_id"] for run in json_out(cli("runs", "list", "--json"))] == [ids["default"]]


def test_a_name_of_another_project_is_one_sentence_and_exit_1(
    cli: Cli, small_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in(monkeypatch, "team-a")
    assert_ok(cli("data", "add", "shared", small_csv))
    _in(monkeypatch, "team-b")

    result = cli("data", "add", "shared", small_csv)

    assert_cli_error(result, "exists already, in the project 'team-a'")
    assert _datasets(cli) == []


def test_a_malformed_project_is_one_sentence_and_exit_1(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in(monkeypatch, "../team-a")

    result = cli("data", "list")

    assert_cli_error(result, "FORGEML_PROJECT: Invalid project '../team-a'")


def test_data_query_reads_the_datasets_of_its_project_only(
    cli: Cli, small_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in(monkeypatch, "team-a")
    assert_ok(cli("data", "add", "small-a", small_csv))
    rows = json_out(cli("data", "query", 'SELECT count(*) AS n FROM "small-a@v1"', "--json"))
    assert rows[0]["n"] > 0

    for project in ("team-b", None):
        _in(monkeypatch, project)
        for sql in ('SELECT count(*) FROM "small-a@v1"', "SELECT * FROM 'small-a'"):
            assert_cli_error(cli("data", "query", sql), "'small-a' belongs to the project 'team-a'")


def test_a_transform_reads_the_datasets_of_its_project_only(
    cli: Cli, small_csv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in(monkeypatch, "team-a")
    assert_ok(cli("data", "add", "small-a", small_csv))

    for project in ("team-b", None):
        _in(monkeypatch, project)
        for command in (("split", "small-a"), ("clean", "small-a@v1", "--name", "mine")):
            assert_cli_error(
                cli("data", *command), "Dataset 'small-a' belongs to the project 'team-a'"
            )
        assert _datasets(cli) == []
    _in(monkeypatch, "team-a")
    assert_ok(cli("data", "split", "small-a"))
    assert _datasets(cli) == ["small-a"]


# each reads small-a's rows by name (as `data head|export`, `monitor drift --reference`,
# `prompts eval --data`, `rag index dataset:...`), so each is held to small-a's project;
# the last field: whether the command succeeds in team-a (prompts eval calls no model here)
DATASET_READS = [
    (("data", "head", "small-a"), True),
    (("data", "export", "small-a@v1", "OUT/exported.csv"), True),
    (("monitor", "drift", "--reference", "small-a@v1", "--current", "small-a", "--json"), True),
    (("prompts", "eval", "qa@v1", "--data", "small-a@v1", "--model-url",
      "http://127.0.0.1:9/v1", "--model", "m"), False),
    (("rag", "index", "cities", "dataset:small-a@v1:city"), True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "succeeds"),
    [pytest.param(*read, id=" ".join(read[0][:2])) for read in DATASET_READS],
)
def test_a_read_of_a_dataset_by_name_is_held_to_its_project(
    cli: Cli,
    small_csv: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
    succeeds: bool,
) -> None:
    argv = [arg.replace("OUT", str(tmp_path)) for arg in command]
    _in(monkeypatch, "team-a")
    assert_ok(cli("data", "add", "small-a", small_csv))

    for project in ("team-b", None):
        _in(monkeypatch, project)
        refused = cli(*argv)
        assert_cli_error(refused, "Dataset 'small-a' belongs to the project 'team-a', not ")
    assert not (tmp_path / "exported.csv").exists()
    _in(monkeypatch, "team-a")
    result = cli(*argv)
    assert (result.code == 0) == succeeds, result.stderr
    assert "belongs to the project" not in result.stderr


def _prompts(cli: Cli) -> list[str]:
    return [item["name"] for item in json_out(cli("prompts", "list", "--json"))]


def test_each_project_lists_and_changes_its_own_prompts(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "qa.yaml"
    spec.write_text("template: 'Q: {{ question }}'\nvariables: [{name: question}]\n")
    _in(monkeypatch, "team-a")
    assert_ok(cli("prompts", "create", "qa-a", "--file", spec))
    _in(monkeypatch, None)
    assert_ok(cli("prompts", "create", "qa", "--file", spec))

    assert _prompts(cli) == ["qa"]
    _in(monkeypatch, "team-a")
    assert _prompts(cli) == ["qa-a"]
    assert_ok(cli("prompts", "alias", "qa-a@v1", "prod"))
    _in(monkeypatch, "team-b")
    assert _prompts(cli) == []
    assert_cli_error(
        cli("prompts", "create", "qa-a", "--file", spec), "exists already, in the project 'team-a'"
    )
    assert_cli_error(cli("prompts", "alias", "qa-a@v1", "x"), "belongs to the project 'team-a'")


def _indexes() -> list[str]:
    from forgeml.sdk.local import LocalRag

    return [item["name"] for item in LocalRag().list()]


@pytest.mark.slow
def test_each_project_indexes_lists_and_uses_its_own_rag_indexes(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nbisect inserts into a sorted list.\n")
    labelled = tmp_path / "set.jsonl"
    labelled.write_text('{"query": "a sorted list", "relevant": ["lists.md"]}\n')
    _in(monkeypatch, "team-a")
    assert json_out(cli("rag", "index", "docs-a", docs, "--json"))["project"] == "team-a"
    uses = [("rag", "query", "docs-a", "a sorted list"), ("rag", "rebuild", "docs-a"),
            ("rag", "eval", "docs-a", "--set", labelled),
            ("rag", "answer", "docs-a", "What keeps a list sorted?", "--model-url",
             "http://127.0.0.1:9/v1", "--model", "m")]  # fmt: skip
    for command in uses[:3]:
        assert_ok(cli(*command))
    assert _indexes() == ["docs-a"]

    for project in ("team-b", None):
        _in(monkeypatch, project)
        assert _indexes() == []
        assert_cli_error(
            cli("rag", "index", "docs-a", docs), "exists already, in the project 'team-a'"
        )
        for command in uses:
            assert_cli_error(cli(*command), "'docs-a' belongs to the project 'team-a'")


def _label_tasks(cli: Cli) -> list[str]:
    return [item["name"] for item in json_out(cli("label", "list", "--json"))]


def test_each_project_lists_and_uses_its_own_label_tasks(
    cli: Cli, small_csv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = tmp_path / "labels.csv"
    labels.write_text("item,annotator,label\n1,bob,a\n")
    _in(monkeypatch, "team-a")
    assert_ok(cli("data", "add", "small-a", small_csv))
    created = json_out(cli("label", "create", "t-a", "--dataset", "small-a@v1", "--classes",
                           "a,b", "--json"))  # fmt: skip
    assert created["project"] == "team-a"
    assert _label_tasks(cli) == ["t-a"]
    uses = [("next", "t-a"), ("submit", "t-a", "0", "a"), ("import", "t-a", labels),
            ("reorder", "t-a", "--strategy", "random", "--seed", "1"),
            ("export", "t-a", "--resolve", "majority")]  # fmt: skip

    for project in ("team-b", None):
        _in(monkeypatch, project)
        assert _label_tasks(cli) == []
        assert_cli_error(
            cli("label", "create", "t-a", "--dataset", "small-a@v1", "--classes", "a"),
            "exists already, in the project 'team-a'",
        )
        assert_cli_error(
            cli("label", "create", "t-b", "--dataset", "small-a@v1", "--classes", "a"),
            "Dataset 'small-a' belongs to the project 'team-a'",
        )
        for command in uses:
            assert_cli_error(
                cli("label", *command), "Label task 't-a' belongs to the project 'team-a'"
            )
    _in(monkeypatch, "team-a")
    for command in uses:
        assert_ok(cli("label", *command))
    assert "small-a-labelled" in _datasets(cli)


def _alerted(cli: Cli) -> list[str]:
    listed = json_out(cli("alerts", "list", "--json"))
    return [alert["labels"].get("deployment", alert["labels"].get("model")) for alert in listed]


def test_each_project_lists_and_acknowledges_its_own_alerts(
    cli: Cli, home_workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.monitor.alerts import parse_message, receive
    from forgeml.serve.deployments import DeploymentSpec, _records

    spec = DeploymentSpec(model="adult-mlp@v2", model_ref="adult-mlp@v2", replicas=1)
    with home_workspace.store.session() as session:
        _records._add_record(
            session, home_workspace.in_project("team-a"), "web", spec, "failed", _records.now()
        )
    alerts = [
        {
            "status": "firing",
            "labels": {"alertname": "Backlog", **labels},
            "annotations": {},
            "startsAt": "2026-12-03T10:00:00Z",
            "fingerprint": key,
        }
        for key, labels in (("f1", {"deployment": "web"}), ("f2", {"model": "lonely"}))
    ]
    receive(home_workspace, parse_message({"version": "4", "status": "firing", "receiver": "r",
                                           "alerts": alerts}))  # fmt: skip

    _in(monkeypatch, None)
    assert _alerted(cli) == ["lonely"]
    _in(monkeypatch, "team-a")
    [alert] = json_out(cli("alerts", "list", "--json"))
    assert (alert["labels"]["deployment"], alert["project"]) == ("web", "team-a")
    _in(monkeypatch, "team-b")
    assert _alerted(cli) == []
    assert_cli_error(cli("alerts", "ack", alert["id"][:8]), "belongs to the project 'team-a'")
    _in(monkeypatch, "team-a")
    assert_ok(cli("alerts", "ack", alert["id"][:8]))
    assert json_out(cli("alerts", "show", alert["id"], "--json"))["acked_by"] == "tester"


def _keys(cli: Cli) -> list[str]:
    return [item["name"] for item in json_out(cli("keys", "list", "--json"))]


def test_each_project_creates_lists_revokes_and_reports_its_own_keys(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.gateway._usage import UsageRecorder
    from tests.gateway.conftest import add_deployment

    home = Workspace(Settings(home=tmp_path / "home", user="tester"))
    add_deployment(home, "served-a", ["http://127.0.0.1:9"], project="team-a")
    _in(monkeypatch, "team-a")
    created = json_out(cli("keys", "create", "--name", "ci-a", "--scope", "served-a", "--json"))
    assert created["project"] == "team-a"
    recorder = UsageRecorder(home)
    recorder.record(created["id"], "served-a", forwarded=True, error=False, latency_ms=1.0)
    recorder.flush()
    home.close()
    assert _keys(cli) == ["ci-a"]
    assert [row["name"] for row in json_out(cli("keys", "usage", "--json"))] == ["ci-a"]
    by_key = json_out(cli("cost", "report", "--by", "key", "--json"))
    assert [row["name"] for row in by_key["rows"]] == ["ci-a"]

    for project in ("team-b", None):
        _in(monkeypatch, project)
        assert _keys(cli) == []
        assert json_out(cli("keys", "usage", "--json")) == []
        assert json_out(cli("cost", "report", "--by", "key", "--json"))["rows"] == []
        assert_cli_error(
            cli("keys", "revoke", created["prefix"]), "belongs to the project 'team-a'"
        )
        assert_cli_error(
            cli("keys", "create", "--name", "x", "--scope", "served-a"),
            "'served-a' belongs to the project 'team-a'",
        )
    _in(monkeypatch, "team-a")
    assert_ok(cli("keys", "revoke", created["prefix"]))
