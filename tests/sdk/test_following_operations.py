"""`forgeml.sdk`'s RAG indexes, pipeline runs, agent runs, gateway keys, cost, alerts and
deployments follow FORGEML_SERVER: each answer through the server equals the local
workspace's (issue 15)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from forgeml import sdk
from tests.agents import conftest as agents
from tests.agents.conftest import ChatServer
from tests.cli._served import Served, served_on
from tests.pipelines.conftest import HELLO_PIPELINE
from tests.sdk._sides import Call, Sides
from tests.tracking import conftest as tracking

pytestmark = pytest.mark.slow

# the fixtures of the agent and tracking tests, used here too
chat_server = agents.chat_server
mlflow_template = tracking.mlflow_template


def _fire(served: Served) -> str:
    from forgeml.monitor.alerts import list_alerts, parse_message, receive

    alert = {
        "status": "firing", "labels": {"alertname": "ForgemlQueueBacklog", "model": "adult-mlp",
        "severity": "warning"}, "annotations": {"summary": "Model adult-mlp queues."},
        "startsAt": "2026-12-03T10:00:00Z", "fingerprint": "sdk-ops",
    }  # fmt: skip
    receive(
        served.workspace,
        parse_message({"version": "4", "status": "firing", "receiver": "r", "alerts": [alert]}),
    )
    return str(list_alerts(served.workspace, "firing")[0].id)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, mlflow_template: Path) -> Iterator[Served]:
    """A served workspace with an index (two versions), two pipeline runs, a job that ran,
    a gateway key and a firing alert; MLflow's store for the agents' traces."""
    from forgeml.gateway import create_key
    from forgeml.pipelines import load_pipeline, run_pipeline
    from forgeml.rag.options import IndexOptions
    from forgeml.rag.versions import build_version
    from forgeml.scheduler.submit import submit_and_run
    from tests.rag.conftest import write_stdlib_docs

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        with served_on("sqlite", tmp_path_factory) as home:
            shutil.copyfile(mlflow_template, home.home / "mlflow.db")
            docs = write_stdlib_docs(tmp_path_factory.mktemp("docs"), ("bisect", "heapq"))
            for chunk_tokens in (96, 64):
                build_version(
                    home.workspace, "std", [str(docs)], IndexOptions(chunk_tokens=chunk_tokens)
                )
            spec = tmp_path_factory.mktemp("pipeline") / "hello.yaml"
            spec.write_text(HELLO_PIPELINE)
            for _ in range(2):  # the second run is served from the cache
                run_pipeline(home.workspace, load_pipeline(spec, []))
            fields = {"command": ["sh", "-c", "echo hello"], "name": "greet"}
            submit_and_run(home.workspace, fields, detach=False, wait=False, output=lambda _: None)
            create_key(home.workspace, "web", ["adult"], rate_per_s=5.0)
            _fire(home)
            yield home


def _first_alert() -> str:
    return str(sdk.alerts.list()[0]["id"])


READS: dict[str, Call] = {
    "rag.list": sdk.rag.list,
    "rag.versions": lambda: sdk.rag.versions("std"),
    "rag.show": lambda: sdk.rag.show("std@v1"),
    "rag.query": lambda: sdk.rag.query("std", "insert into a sorted list"),
    "rag.query bm25": lambda: sdk.rag.query("std@v1", "insort", k=2, mode="bm25"),
    "rag.query weighted": lambda: sdk.rag.query("std@v2", "heap push", k=3, weight=0.5),
    "rag.show missing": lambda: sdk.rag.show("nosuch"),
    "rag.query bad mode": lambda: sdk.rag.query("std", "x", mode="fuzzy"),
    "pipelines.list": sdk.pipelines.list,
    "pipelines.list one": lambda: sdk.pipelines.list(1),
    "pipelines.show": lambda: sdk.pipelines.show("hello"),
    "pipelines.show missing": lambda: sdk.pipelines.show("nosuch"),
    "keys.list": sdk.keys.list,
    "keys.revoke missing": lambda: sdk.keys.revoke("nope"),
    "cost.report": sdk.cost.report,
    "cost.report queue": lambda: sdk.cost.report("queue"),
    "cost.report key": lambda: sdk.cost.report(by="key"),
    "cost.report bad since": lambda: sdk.cost.report(since="whenever"),
    "cost.budgets": sdk.cost.budgets,
    "alerts.list": sdk.alerts.list,
    "alerts.list all": lambda: sdk.alerts.list("all"),
    "alerts.show": lambda: sdk.alerts.show(_first_alert()),
    "alerts.show prefix": lambda: sdk.alerts.show(_first_alert()[:8]),
    "alerts.show missing": lambda: sdk.alerts.show("nosuch"),
    "alerts.ack missing": lambda: sdk.alerts.ack("nosuch"),
    "deployments.show missing": lambda: sdk.deployments.show("nosuch"),
    "deployments.delete missing": lambda: sdk.deployments.delete("nosuch"),
    "agents.show missing": lambda: sdk.agents.show("nosuch"),
}


@pytest.mark.parametrize("name", list(READS))
def test_a_read_answers_the_same_locally_and_through_the_server(sides: Sides, name: str) -> None:
    local = sides.local(READS[name])
    remote = sides.remote(READS[name])

    assert remote == local
    assert local not in ([], {}, None), "the comparison must be over something"


def test_no_deployment_lists_alike(sides: Sides) -> None:
    for deleted in (False, True):
        read = lambda d=deleted: sdk.deployments.list(d)  # noqa: E731
        assert sides.remote(read) == sides.local(read) == []


def _key_fields(key: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in key.items() if k not in ("id", "prefix", "key", "created_at")}


def test_a_key_made_on_either_side_lists_and_revokes_alike(sides: Sides) -> None:
    made = {
        side.__name__: side(lambda n=side.__name__: sdk.keys.create(f"sdk-{n}", ["adult"], 2.0))
        for side in (sides.local, sides.remote)
    }

    local, remote = made["local"], made["remote"]
    assert _key_fields(remote) | {"name": "-"} == _key_fields(local) | {"name": "-"}
    assert f"_{remote['prefix']}_" in remote["key"] and local["key"] != remote["key"]
    assert sides.remote(sdk.keys.list) == sides.local(sdk.keys.list)
    revoked = [
        side(lambda k=made[other]["prefix"]: sdk.keys.revoke(k))
        for side, other in ((sides.local, "remote"), (sides.remote, "local"))
    ]
    assert [r["revoked_at"] is not None for r in revoked] == [True, True]
    # revoked already: the same error on both sides
    again = lambda: sdk.keys.revoke(made["local"]["prefix"])  # noqa: E731
    assert sides.remote(again) == sides.local(again)
    assert sides.local(again)[0] == "KeyStateError"


def test_key_usage_answers_alike_on_both_sides(sides: Sides) -> None:
    from contextlib import closing
    from datetime import UTC, datetime

    from forgeml.core.workspace import open_workspace
    from forgeml.gateway._usage import UsageRecorder

    key = sides.local(lambda: sdk.keys.create("sdk-usage", ["adult"]))
    with closing(open_workspace()) as workspace:  # the served workspace, as a gateway flushes
        recorder = UsageRecorder(workspace)
        recorder.record(key["id"], "adult", forwarded=True, error=False, latency_ms=4.0)
        recorder.record(key["id"], "adult", forwarded=True, error=True, latency_ms=8.0)
        recorder.record(key["id"], "adult", forwarded=False, error=False, latency_ms=0.0)
        recorder.flush()
    since = datetime(2026, 1, 1, tzinfo=UTC)

    local = sides.local(lambda: sdk.keys.usage(since))

    assert sides.remote(lambda: sdk.keys.usage(since)) == local
    assert sides.remote(sdk.keys.usage) == sides.local(sdk.keys.usage)
    row = next(row for row in local if row["prefix"] == key["prefix"])
    assert (row["requests"], row["errors"], row["rejected"]) == (2, 1, 1)
    assert row["mean_latency_ms"] == 6.0
    future = datetime(2999, 1, 1, tzinfo=UTC)
    assert sides.remote(lambda: sdk.keys.usage(future)) == []


def test_an_alert_acknowledged_through_the_server_shows_alike(sides: Sides) -> None:
    alert = sides.local(_first_alert)

    acked = sides.remote(lambda: sdk.alerts.ack(alert))

    assert acked["acked_by"] == "olivia"
    assert sides.local(lambda: sdk.alerts.show(alert)) == acked
    assert sides.remote(lambda: sdk.alerts.show(alert)) == acked


def _run_fields(run: dict[str, Any]) -> dict[str, Any]:
    # the id, wall time and trace ids of each run are its own
    return {k: v for k, v in run.items() if k not in ("run_id", "elapsed_s", "trace_ids")}


def test_an_agent_run_waits_then_is_approved_alike(sides: Sides, chat_server: ChatServer) -> None:
    spec = {
        "model": {"url": chat_server.url, "name": "smol"},
        "tools": [{"name": "calculator", "requires_approval": True}],
    }
    stopped = {}
    for side in (sides.local, sides.remote):

        def waited_then_approved() -> tuple[dict[str, Any], dict[str, Any]]:
            chat_server.call("calculator", {"expression": "2 ** 10"})
            chat_server.say("2 to the 10th is 1024.")
            run_id = sdk.agents.start(spec, "2 ** 10?")["run_id"]
            waiting = sdk.agents.wait(run_id, poll_s=0.01)
            sdk.agents.approve(run_id, ["c1"])
            return waiting, sdk.agents.wait(run_id, poll_s=0.01)

        stopped[side.__name__] = side(waited_then_approved)

    (local_waiting, local_done), (remote_waiting, remote_done) = stopped.values()
    assert _run_fields(remote_waiting) == _run_fields(local_waiting)
    assert _run_fields(remote_done) == _run_fields(local_done)
    assert local_waiting["stop_reason"] == "awaiting_approval", local_waiting
    assert local_done["answer"] == "2 to the 10th is 1024."
    # a run saved by either side shows alike on both
    for run in (local_done, remote_done):
        shown = [
            side(lambda r=run["run_id"]: sdk.agents.show(r)) for side in (sides.remote, sides.local)
        ]
        assert shown[0] == shown[1]
