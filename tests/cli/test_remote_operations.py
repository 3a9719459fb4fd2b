"""Remote mode of `forgeml jobs logs`, `cost`, `alerts` and `monitor rules|dashboard`: the
same output and exit code through the API as on the local workspace, on SQLite and
PostgreSQL; and every command of these groups either has a remote mode or says why not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from forgeml.auth import issue_token
from forgeml.cli._remote import LOCAL_COMMANDS, LOCAL_ONLY, REMOTE_COMMANDS
from forgeml.client._commands import job_command
from forgeml.core.config import Settings
from forgeml.core.workspace import Workspace
from tests.cli import test_remote as shared
from tests.cli._served import assert_queued_as_job, assert_same_as_local
from tests.cli.test_remote import BACKENDS, Forgeml

# the served workspaces of tests/cli/test_remote.py, built once more for this module
forgeml = shared.forgeml
served = shared.served
sqlite_served = shared.sqlite_served
postgresql_served = shared.postgresql_served
module_postgres_url = shared.module_postgres_url

READS = [
    ("jobs", "logs", "{ran}"),
    ("jobs", "logs", "{ran}", "--attempt", "1"),
    ("jobs", "logs", "{ran}", "--follow"),
    ("jobs", "logs", "{job}"),
    ("jobs", "logs", "{job}", "--attempt", "7"),
    ("jobs", "logs", "nosuch", "-f"),
    ("cost", "report"),
    ("cost", "report", "--json"),
    ("cost", "report", "--by", "queue"),
    ("cost", "report", "--by", "key"),
    ("cost", "report", "--by", "key", "--json"),
    ("cost", "budgets"),
    ("cost", "budgets", "--json"),
    ("cost", "report", "--since", "whenever"),
    ("alerts", "list"),
    ("alerts", "list", "--state", "all", "--json"),
    ("alerts", "show", "{alert}"),
    ("alerts", "show", "{alert_prefix}", "--json"),
    ("alerts", "show", "nosuch"),
    ("alerts", "ack", "nosuch"),
    ("alerts", "list", "--state", "bogus"),
    ("monitor", "rules"),
    ("monitor", "dashboard"),
    ("deploy", "list"),
    ("deploy", "list", "--deleted", "--json"),
    ("deploy", "show", "nosuch"),
    ("deploy", "delete", "nosuch"),
]


def _workspace(forgeml: Forgeml) -> Workspace:
    home = forgeml.served
    return Workspace(Settings(home=home.home, db_url=home.db_url, user="tester"))


def _fire(workspace: Workspace) -> str:
    from forgeml.monitor.alerts import list_alerts, parse_message, receive

    alert = {
        "status": "firing", "labels": {"alertname": "ForgemlQueueBacklog", "model": "adult-mlp",
        "severity": "warning"}, "annotations": {"summary": "Model adult-mlp queues."},
        "startsAt": "2026-12-03T10:00:00Z", "fingerprint": "remote-ops",
    }  # fmt: skip
    message = {"version": "4", "status": "firing", "receiver": "r", "alerts": [alert]}
    receive(workspace, parse_message(message))
    return str(list_alerts(workspace, "firing")[0].id)


@pytest.fixture
def names(forgeml: Forgeml) -> Iterator[dict[str, str]]:
    """A job that ran (its log written) and a firing alert, on the served workspace."""
    from forgeml.scheduler.submit import submit_and_run

    with closing(_workspace(forgeml)) as workspace:
        fields = {"command": ["sh", "-c", "echo hello; echo world"], "name": "greet"}
        ran = submit_and_run(workspace, fields, detach=False, wait=False, output=lambda _: None)
        alert = _fire(workspace)
    job = forgeml.served.job_id
    yield {"ran": ran.id, "job": job, "alert": alert, "alert_prefix": alert[:8]}


@pytest.mark.slow
@BACKENDS
@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_remote_operations_print_what_local_ones_print(
    forgeml: Forgeml, names: dict[str, str], command: tuple[str, ...]
) -> None:
    args = [arg.format(**names) for arg in command]

    local = forgeml(*args)
    remote = forgeml.remote(*args)

    assert_same_as_local(local, remote)
    if not local.code:
        assert local.stdout


def test_a_log_followed_remotely_is_the_log_the_job_wrote(
    forgeml: Forgeml, names: dict[str, str]
) -> None:
    followed = forgeml.remote("jobs", "logs", names["ran"], "-f")

    assert (followed.code, followed.stdout) == (0, "hello\nworld\n")


@BACKENDS
def test_an_alert_acknowledged_remotely_names_the_caller(
    forgeml: Forgeml, names: dict[str, str]
) -> None:
    acked = forgeml.remote("alerts", "ack", names["alert_prefix"])
    shown = forgeml("alerts", "show", names["alert"], "--json")

    assert acked.code == 0, acked.stderr
    assert acked.stdout.startswith(f"Alert {names['alert']} (ForgemlQueueBacklog) acknowledged")
    assert json.loads(shown.stdout)["acked_by"] == "olivia"


def test_a_viewer_cannot_acknowledge_an_alert(forgeml: Forgeml, names: dict[str, str]) -> None:
    refused = forgeml.remote("alerts", "ack", names["alert"], token="victor")

    assert refused.code == 1 and refused.stderr.startswith("error: ")


def test_a_teams_alerts_are_listed_and_acknowledged_remotely_in_its_project_only(
    forgeml: Forgeml, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from sqlalchemy import delete

    from forgeml.core.store import AlertRecord, DeploymentRecord
    from forgeml.monitor.alerts import parse_message, receive
    from forgeml.serve.deployments import DeploymentSpec, _records
    from tests.auth._accounts import fast_settings, person

    spec = DeploymentSpec(model="adult-mlp@v1", model_ref="adult-mlp@v1", replicas=1)
    alert = {
        "status": "firing",
        "labels": {"alertname": "Backlog", "deployment": "web-a"},
        "annotations": {},
        "startsAt": "2026-12-03T10:00:00Z",
        "fingerprint": "team-a",
    }
    with closing(_workspace(forgeml)) as workspace:
        person(workspace, fast_settings(tmp_path), "tara", "developer", "team-a")
        forgeml.served.tokens["tara"] = issue_token(workspace, "tara", "cli", actor="t")[1]
        with workspace.store.session() as session:
            in_a = workspace.in_project("team-a")
            _records._add_record(session, in_a, "web-a", spec, "failed", _records.now())
        receive(workspace, parse_message({"version": "4", "status": "firing", "receiver": "r",
                                          "alerts": [alert]}))  # fmt: skip
        try:
            monkeypatch.setenv("FORGEML_PROJECT", "team-a")
            listed = forgeml.remote("alerts", "list", "--json", token="tara")
            [found] = json.loads(listed.stdout)
            assert (found["labels"]["deployment"], found["project"]) == ("web-a", "team-a")
            monkeypatch.delenv("FORGEML_PROJECT")
            in_default = json.loads(forgeml.remote("alerts", "list", "--json").stdout)
            assert "team-a" not in {alert["project"] for alert in in_default}
            # tara's role holds in team-a, but an acknowledgement acts in the alert's project
            refused = forgeml.remote("alerts", "ack", found["id"][:8], token="tara")
            assert refused.code == 1
            assert "belongs to the project 'team-a'" in refused.stderr, refused.stderr
            monkeypatch.setenv("FORGEML_PROJECT", "team-a")
            acked = forgeml.remote("alerts", "ack", found["id"][:8], token="tara")
            assert acked.code == 0 and "acknowledged by tara" in acked.stdout, acked
        finally:
            with workspace.store.session() as session:
                session.execute(delete(AlertRecord).where(AlertRecord.project == "team-a"))
                session.execute(delete(DeploymentRecord).where(DeploymentRecord.name == "web-a"))


# every command of the groups this module covers, as `forgeml GROUP --help` lists them
GROUPS = {
    "data": [
        "add", "list", "versions", "show", "head", "diff", "export", "query", "rebuild",
        "clean", "validate", "redact", "split", "augment", "features", "crawl", "ingest-stream",
    ],
    "jobs": ["submit", "list", "show", "logs", "cancel", "retry", "export"],
    "runs": ["list", "show", "compare", "reproduce"],
    "models": [
        "list", "show", "promote", "compare", "import", "export", "card", "mitigate", "explain",
    ],
    "cost": ["report", "budgets"],
    "alerts": ["list", "show", "ack"],
    "monitor": ["drift", "feedback", "accuracy", "online", "rules", "dashboard", "policy"],
    "deploy": ["create", "list", "show", "rollback", "delete", "check"],
    "label": [
        "create", "reorder", "list", "show", "next", "submit", "import", "agreement", "export",
    ],
}  # fmt: skip


def _commands_of(group: str) -> set[str]:
    from forgeml.cli import COMMANDS

    loaded = next(entry for entry in COMMANDS if entry.name == group).load()
    return set(loaded.commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize("group", GROUPS)
def test_every_command_has_a_remote_mode_or_a_reason(group: str) -> None:
    listed = _commands_of(group)
    without = {
        command
        for command in listed
        if (group, command) not in REMOTE_COMMANDS
        and (group, command) not in LOCAL_COMMANDS
        and group not in LOCAL_ONLY
        and job_command([group, command]) is None
    }

    assert listed == set(GROUPS[group])
    assert without == set()


def test_every_command_of_every_group_has_a_remote_mode_or_a_reason() -> None:
    from forgeml.cli import COMMANDS
    from forgeml.cli._remote import RUNS_HERE

    unclassified = []
    for entry in COMMANDS:
        loaded = entry.load()
        commands = getattr(loaded, "commands", None)  # a group; else one command
        for command in sorted(commands) if commands is not None else [None]:
            key = (entry.name, command)
            if not (
                key in REMOTE_COMMANDS
                or (entry.name, None) in REMOTE_COMMANDS
                or key in RUNS_HERE
                or entry.name in LOCAL_ONLY
                or job_command([entry.name, *([command] if command else [])]) is not None
            ):
                unclassified.append(key)

    assert unclassified == []


@pytest.mark.parametrize("command", [("models", "export"), ("jobs", "export")])
def test_a_command_that_writes_onto_this_machine_has_a_remote_mode(
    command: tuple[str, str],
) -> None:
    # the server builds the bundle or renders the manifest; the command writes it here
    assert command in REMOTE_COMMANDS
    assert command not in LOCAL_COMMANDS


@pytest.mark.parametrize(
    "command",
    [
        ("models", "compare", "adult-mlp@v1", "adult-mlp@v2"),
        ("monitor", "policy", "list"),
        ("deploy", "rollback", "web"),
        ("deploy", "create", "adult-mlp@v1", "--name", "web"),
        ("deploy", "adult-mlp@v1", "--name", "web"),
    ],
)
def test_a_command_that_runs_beside_the_workspace_runs_on_the_server_as_a_job(
    forgeml: Forgeml, command: tuple[str, ...]
) -> None:
    assert_queued_as_job(forgeml, command)


@BACKENDS
def test_a_job_submitted_remotely_is_queued_as_a_local_detached_one(forgeml: Forgeml) -> None:
    submit = ("jobs", "submit", "--detach", "--name", "later", "--", "echo", "hi")
    local = forgeml(*submit)
    remote = forgeml.remote(*submit)
    as_json = json.loads(forgeml.remote(*submit[:2], "--json", *submit[2:]).stdout)

    local_id, remote_id = local.stdout.split()[1], remote.stdout.split()[1]
    assert remote.code == local.code == 0, remote.stderr
    assert remote.stdout.replace(remote_id, "ID").replace(remote_id[:12], "ID") == (
        local.stdout.replace(local_id, "ID").replace(local_id[:12], "ID")
    )
    shown = json.loads(forgeml("jobs", "show", remote_id, "--json").stdout)
    assert (shown["state"], shown["owner"], shown["command"]) == (
        "PENDING",
        "olivia",
        ["echo", "hi"],
    )
    assert (as_json["state"], as_json["name"]) == ("PENDING", "later")
    for job in (local_id, remote_id, as_json["job_id"]):  # the served queue as it was
        forgeml("jobs", "cancel", job)


@BACKENDS
def test_runs_compared_remotely_print_what_local_compare_prints(
    forgeml: Forgeml, tmp_path: pytest.TempPathFactory
) -> None:
    listed = json.loads(forgeml("runs", "list", "--json").stdout)
    ids = [run["run_id"][:12] for run in listed][:2]
    plot = f"{tmp_path}/curves.png"
    for args in [
        (*ids, "--plot", plot),
        (*ids, "--plot", plot, "--json"),
        ("nosuch", "--plot", plot),
    ]:
        local = forgeml("runs", "compare", *args)
        remote = forgeml.remote("runs", "compare", *args)

        assert (remote.code, remote.stdout, remote.stderr) == (
            local.code,
            local.stdout,
            local.stderr,
        )
    assert (
        local.code == 1
        and json.loads(forgeml.remote("runs", "compare", *ids, "--plot", plot, "--json").stdout)[
            "metrics"
        ]
    )


@BACKENDS
def test_a_run_reproduced_remotely_is_queued_as_a_local_detached_one(forgeml: Forgeml) -> None:
    reproduce = ("runs", "reproduce", "adult-mlp", "--set", "max_steps=5", "--detach")
    local = forgeml(*reproduce)
    remote = forgeml.remote(*reproduce)
    as_json = json.loads(forgeml.remote(*reproduce, "--json").stdout)

    local_id, remote_id = local.stdout.split()[1], remote.stdout.split()[1]
    assert remote.code == local.code == 0, remote.stderr
    assert remote.stdout.replace(remote_id, "ID").replace(remote_id[:12], "ID") == (
        local.stdout.replace(local_id, "ID").replace(local_id[:12], "ID")
    )
    shown = json.loads(forgeml("jobs", "show", remote_id, "--json").stdout)
    assert (shown["state"], shown["owner"], shown["kind"]) == ("PENDING", "olivia", "train")
    assert as_json["state"] == "PENDING"
    for job in (local_id, remote_id, as_json["job_id"]):  # the served queue as it was
        forgeml("jobs", "cancel", job)
    missing = forgeml("runs", "reproduce", "nosuch", "--detach")
    assert forgeml.remote("runs", "reproduce", "nosuch", "--detach").stderr == missing.stderr
    assert missing.code == 1 and missing.stderr.startswith("error: ")


def test_a_run_reproduced_remotely_without_detach_says_to_add_it(forgeml: Forgeml) -> None:
    refused = forgeml.remote("runs", "reproduce", "adult-mlp")

    assert refused.code == 2 and "needs --detach" in refused.stderr


EXPLAINED = [
    ("--top", "3", "--background", "5", "--json"),
    ("--top", "2", "--background", "5"),
    ("--method", "integrated_gradients", "--background", "5", "--json"),
]


@pytest.mark.parametrize("options", EXPLAINED, ids=" ".join)
def test_models_explain_remotely_prints_what_it_prints_locally(
    forgeml: Forgeml, options: tuple[str, ...]
) -> None:
    from tests.serve.conftest import adult_records

    row = json.dumps(adult_records(1)[0])
    args = ("models", "explain", "adult-mlp@v1", "--input", row, *options)

    local = forgeml(*args)
    remote = forgeml.remote(*args)

    assert local.code == 0, local.stderr
    assert_same_as_local(local, remote)


def test_models_explain_refuses_remotely_as_it_does_locally(forgeml: Forgeml) -> None:
    from tests.serve.conftest import adult_records

    row = adult_records(1)[0]
    del row["age"]
    for args in (
        ("models", "explain", "adult-mlp@v1", "--input", json.dumps(row)),
        ("models", "explain", "adult-mlp@v9", "--input", json.dumps(row)),
    ):
        assert_same_as_local(forgeml(*args), forgeml.remote(*args), args)


def test_models_explain_is_no_server_job() -> None:
    assert ("models", "explain") in REMOTE_COMMANDS
    assert job_command(["models", "explain"]) is None
