"""Alert and promotion triggers: each alert that starts firing, each promotion, fires once."""

from __future__ import annotations

from pathlib import Path

import pytest

from forgeml.core.errors import ConfigError, InvalidNameError
from forgeml.core.workspace import Workspace
from forgeml.monitor.alerts import parse_message, receive
from forgeml.pipelines.triggers import add_trigger, evaluate_triggers, list_firings
from tests.pipelines.conftest import write_pipeline
from tests.pipelines.test_triggers import HELLO, T0, Recorder, counts


def _alert(rule: str, status: str = "firing", **labels: str) -> dict[str, object]:
    """What Alertmanager's webhook sends for one alert."""
    return {
        "status": status,
        "labels": {"alertname": rule, **labels},
        "annotations": {"summary": f"{rule} on {labels}"},
        "startsAt": "2026-12-03T12:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus.example/graph",
        "fingerprint": f"{rule}-{sorted(labels.items())}",
    }


def _send(workspace: Workspace, *alerts: dict[str, object], status: str = "firing") -> None:
    message = {"version": "4", "status": status, "receiver": "forgeml", "alerts": list(alerts)}
    receive(workspace, parse_message(message))


def test_an_alert_trigger_fires_once_per_matching_alert_that_starts_firing(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    hello = write_pipeline(tmp_path, HELLO)
    _send(pipe_workspace, _alert("ForgemlDriftDetected", deployment="adult"))  # before: ignored
    add_trigger(pipe_workspace, "retrain", hello, alert="ForgemlDriftDetected,ForgemlAccuracyDrop"
                "{deployment=adult}", now=T0)  # fmt: skip
    submit = Recorder()

    _send(
        pipe_workspace,
        _alert("ForgemlDriftDetected", deployment="other"),
        _alert("ForgemlErrorRateHigh", deployment="adult"),
        _alert("ForgemlAccuracyDrop", deployment="adult"),
    )
    first = evaluate_triggers(pipe_workspace, T0, submit=submit)
    _send(pipe_workspace, _alert("ForgemlAccuracyDrop", deployment="adult"))  # still firing
    again = evaluate_triggers(pipe_workspace, T0, submit=submit)
    _send(pipe_workspace, _alert("ForgemlAccuracyDrop", "resolved", deployment="adult"),
          status="resolved")  # fmt: skip
    _send(pipe_workspace, _alert("ForgemlAccuracyDrop", deployment="adult"))  # fires anew
    later = evaluate_triggers(pipe_workspace, T0, submit=submit)

    assert len(first) == 1 and first[0].event.startswith("alert:")
    assert again == []
    assert len(later) == 1 and later[0].event != first[0].event
    assert [f.event for f in list_firings(pipe_workspace, "retrain")] == [
        later[0].event,
        first[0].event,
    ]


def test_an_alert_trigger_fires_on_its_own_projects_alerts_only(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    from forgeml.serve.deployments import DeploymentSpec, _records

    spec = DeploymentSpec(model="m@v1", model_ref="m@v1", replicas=1)
    in_a = pipe_workspace.in_project("team-a")
    with pipe_workspace.store.session() as session:
        _records._add_record(session, in_a, "adult-a", spec, "failed", _records.now())
    hello = write_pipeline(tmp_path, HELLO)
    add_trigger(in_a, "retrain-a", hello, alert="ForgemlDriftDetected", now=T0)
    add_trigger(pipe_workspace, "retrain", hello, alert="ForgemlDriftDetected", now=T0)

    _send(
        pipe_workspace,
        _alert("ForgemlDriftDetected", deployment="adult-a"),  # team-a's deployment
        _alert("ForgemlDriftDetected", deployment="elsewhere"),  # names nothing: default
    )
    evaluate_triggers(pipe_workspace, T0, submit=Recorder())

    def labels(workspace: Workspace, trigger: str) -> list[str]:
        from forgeml.monitor.alerts import get_alert

        events = [f.event for f in list_firings(workspace, trigger)]
        alerts = [get_alert(workspace, e.removeprefix("alert:")) for e in events]
        return [alert.labels["deployment"] for alert in alerts]

    assert labels(in_a, "retrain-a") == ["adult-a"]
    assert labels(pipe_workspace, "retrain") == ["elsewhere"]


def test_a_promotion_trigger_fires_once_per_promotion_of_its_model(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    hello = write_pipeline(tmp_path, HELLO)
    add_trigger(pipe_workspace, "on-prod", hello, promoted="adult-mlp@production", now=T0)
    add_trigger(pipe_workspace, "on-any", hello, promoted="adult-mlp", now=T0)

    def promote(ref: str, alias: str) -> None:  # the audit event the registry writes
        with pipe_workspace.store.session() as session:
            pipe_workspace.audit(session, "model.promote", ref, {"alias": alias, "metric": "acc"})

    promote("adult-mlp@v2", "production")
    promote("adult-mlp@v3", "staging")
    promote("other@v1", "production")
    fired = evaluate_triggers(pipe_workspace, T0, submit=Recorder())
    again = evaluate_triggers(pipe_workspace, T0, submit=Recorder())

    by_trigger = {f.trigger: [] for f in fired}
    for firing in fired:
        by_trigger[firing.trigger].append(firing.event.split("#")[0])
    assert by_trigger == {
        "on-prod": ["adult-mlp@v2@production"],
        "on-any": ["adult-mlp@v2@production", "adult-mlp@v3@staging"],
    }
    assert again == []


@pytest.mark.parametrize(
    ("fields", "error", "expected"),
    [
        ({"alert": "{deployment=adult}"}, ConfigError, "does not name alert rules"),
        ({"alert": "Drift{deployment adult}"}, ConfigError, "is not label=value"),
        ({"alert": "Drift{deployment=adult"}, ConfigError, "must end with '}'"),
        ({"promoted": "no such/model"}, InvalidNameError, "model name"),
    ],
)
def test_a_bad_subject_is_one_sentence_and_records_nothing(
    pipe_workspace: Workspace, tmp_path: Path, fields: dict[str, str], error: type, expected: str
) -> None:
    hello = write_pipeline(tmp_path, HELLO)
    before = counts(pipe_workspace)

    with pytest.raises(error, match=expected):
        add_trigger(pipe_workspace, "bad", hello, now=T0, **fields)  # type: ignore[arg-type]

    assert counts(pipe_workspace) == before


def test_alerts_that_fire_while_its_run_goes_on_join_that_run(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    from sqlalchemy import select, update

    from forgeml.core.store import JobRecord
    from forgeml.pipelines.triggers import submit_run_job

    hello = write_pipeline(tmp_path, HELLO)
    add_trigger(pipe_workspace, "retrain", hello, alert="ForgemlDriftDetected", now=T0)

    _send(pipe_workspace, _alert("ForgemlDriftDetected", model="adult", version="v1"))
    (first,) = evaluate_triggers(pipe_workspace, T0, submit=submit_run_job)  # job PENDING
    _send(pipe_workspace, _alert("ForgemlDriftDetected", model="adult", version="v2"))
    (joined,) = evaluate_triggers(pipe_workspace, T0, submit=submit_run_job)
    with pipe_workspace.store.session() as session:
        session.execute(update(JobRecord).values(state="SUCCEEDED"))  # the run ended
    _send(pipe_workspace, _alert("ForgemlDriftDetected", model="adult", version="v3"))
    (after,) = evaluate_triggers(pipe_workspace, T0, submit=submit_run_job)

    assert joined.job_id == first.job_id and joined.event != first.event
    assert after.job_id not in (None, first.job_id)
    with pipe_workspace.store.session() as session:
        assert len(session.scalars(select(JobRecord.id)).all()) == 2
