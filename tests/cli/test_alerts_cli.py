from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from forgeml.core.store import AlertRecord
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import parse_message, receive
from tests.cli.conftest import assert_cli_error, assert_ok, json_out


def _fire(workspace: Workspace, fingerprint: str, model: str, status: str = "firing") -> None:
    alert = {
        "status": status, "labels": {"alertname": "ForgemlQueueBacklog", "model": model,
        "severity": "warning"}, "annotations": {"summary": f"Model {model} queues."},
        "startsAt": "2026-12-03T10:00:00Z", "fingerprint": fingerprint,
    }  # fmt: skip
    receive(workspace, parse_message({"version": "4", "status": status, "receiver": "r",
                                      "alerts": [alert]}))  # fmt: skip


def test_list_show_and_ack(cli: Any, home_workspace: Workspace) -> None:
    _fire(home_workspace, "f1", "a")
    _fire(home_workspace, "f2", "b")
    _fire(home_workspace, "f2", "b", "resolved")
    firing = json_out(cli("alerts", "list", "--json"))
    assert [alert["labels"]["model"] for alert in firing] == ["a"]
    everything = json_out(cli("alerts", "list", "--state", "all", "--json"))
    assert sorted(alert["state"] for alert in everything) == ["firing", "resolved"]
    table = cli("alerts", "list")
    assert_ok(table)
    assert "firing" in table.stdout
    alert_id = firing[0]["id"]
    shown = json_out(cli("alerts", "show", alert_id[:8], "--json"))
    assert shown["annotations"] == {"summary": "Model a queues."}
    assert_ok(cli("alerts", "show", alert_id))
    acked = cli("alerts", "ack", alert_id)
    assert_ok(acked)
    assert "acknowledged by tester" in " ".join((acked.stdout + acked.stderr).split())
    assert json_out(cli("alerts", "show", alert_id, "--json"))["acked_by"] == "tester"
    assert "No pending alerts." in cli("alerts", "list", "--state", "pending").stdout


def test_unknown_ids_and_states_are_one_sentence(cli: Any, home_workspace: Workspace) -> None:
    assert_cli_error(cli("alerts", "show", "nope"), "No alert has the id 'nope'.")
    assert_cli_error(cli("alerts", "ack", "nope"), "No alert has the id 'nope'.")
    assert_cli_error(
        cli("alerts", "list", "--state", "burning"), "Unknown alert state 'burning'", code=2
    )


def test_the_server_refuses_a_bad_rule_with_one_sentence(
    cli: Any, home_workspace: Workspace, tmp_path: Path
) -> None:
    (tmp_path / "mine.yml").write_text(
        "groups:\n  - name: g\n    rules:\n      - alert: Broken\n        expr: rate(x)\n"
    )
    config = tmp_path / "alerts.yml"
    config.write_text("rule_files: [mine.yml]\n")
    assert_cli_error(
        cli("server", "--alert-config", str(config)),
        f"{tmp_path / 'mine.yml'}: rule Broken (group g) has a bad expression: "
        "expected type matrix in call to function 'rate', got vector.",
    )
    config.write_text("channels: [{name: x, type: pager}]\n")
    assert_cli_error(cli("server", "--alert-config", str(config)), f"{config}: channels.0")
    with home_workspace.store.session() as session:
        assert session.scalar(select(func.count()).select_from(AlertRecord)) == 0
