from __future__ import annotations

import csv
import itertools
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from sqlalchemy import select, update

from forgeml.core.config import Settings
from forgeml.core.errors import (
    AlreadyExistsError,
    ConfigError,
    InvalidNameError,
    NotFoundError,
    ServiceUnavailableError,
    UsageError,
)
from forgeml.core.store import AuditEvent, DeploymentRevisionRecord, ModelVersionRecord
from forgeml.core.workspace import Workspace
from forgeml.serve import _supervisor, deployments
from tests._wait import wait_until
from tests.train.conftest import ADULT_CSV, copy_home, trained_adult_template

# The slow tests walk one deployment (NAME, real `forgeml serve` processes) through its
# life in file order: deploy, redeploy, rollback, failed redeploy, check, delete.
NAME = "dep-adult"
pytestmark = pytest.mark.timeout(300)


def adult_records(count: int = 3) -> list[dict[str, Any]]:
    """The first raw Adult rows as a caller sends them (no label, numbers as numbers)."""
    with ADULT_CSV.open(encoding="utf-8") as handle:
        rows = list(itertools.islice(csv.DictReader(handle, skipinitialspace=True), count))
    numeric = {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}
    return [
        {key: int(value) if key in numeric else value for key, value in row.items() if key != "Y"}
        for row in rows
    ]


def server_pids(name: str) -> list[int]:
    """Live `forgeml serve ... --name NAME` processes on this machine started under this
    pytest worker (servers inherit its environment; with `make test`'s two workers the other
    worker serves deployments of the same names at the same time)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    found = []
    for process in psutil.process_iter(["cmdline", "status", "environ"]):
        command = process.info["cmdline"] or []
        if process.info["status"] == psutil.STATUS_ZOMBIE or "serve" not in command:
            continue
        if worker and (process.info["environ"] or {}).get("PYTEST_XDIST_WORKER") != worker:
            continue
        if "--name" in command and command[command.index("--name") + 1] == name:
            found.append(process.pid)
    return found


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill_servers(name: str) -> None:
    for pid in server_pids(name):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def predict(url: str, name: str = NAME) -> list[Any]:
    response = httpx.post(
        f"{url}/v1/models/{name}:predict", json={"instances": adult_records()}, timeout=10
    )
    assert response.status_code == 200, response.text
    predictions: list[Any] = response.json()["predictions"]
    assert len(predictions) == 3
    return predictions


def audit_actions(workspace: Workspace, ref: str) -> list[str]:
    with workspace.store.session() as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.object_ref == ref))
        return [event.action for event in events]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    home = copy_home(
        trained_adult_template(tmp_path_factory), tmp_path_factory.mktemp("deploy") / "home"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("MLFLOW_TRACKING_URI", raising=False)
        opened = Workspace(Settings(home=home, user="tester"))
        try:
            yield opened
        finally:
            kill_servers(NAME)
            opened.close()


@pytest.fixture(scope="module")
def deployed(workspace: Workspace) -> deployments.Deployment:
    return deployments.deploy(
        workspace, NAME, "adult-mlp@v1", replicas=2, latency_objective_ms=300, ready_timeout=120
    )


@pytest.mark.slow
def test_deploy_starts_two_ready_replicas_that_answer_predict_and_v2(
    workspace: Workspace, deployed: deployments.Deployment
) -> None:
    assert deployed.status == "ready" and deployed.revision == 1
    assert deployed.spec.model == "adult-mlp@v1" and deployed.spec.replicas == 2
    assert [r.role for r in deployed.replicas] == ["primary", "primary"]
    assert len({r.port for r in deployed.replicas}) == 2
    assert sorted(server_pids(NAME)) == sorted(r.pid for r in deployed.replicas if r.pid)
    for replica in deployed.replicas:
        assert replica.status == "ready" and replica.url.startswith("http://127.0.0.1:")
        predict(replica.url)
        assert httpx.get(f"{replica.url}/v2/models/{NAME}/ready", timeout=5).status_code == 200
        assert httpx.get(f"{replica.url}/v2/models/{NAME}", timeout=5).status_code == 200
        # the deployment's objective reaches every replica, for the shipped alert rule
        metrics = httpx.get(f"{replica.url}/metrics", timeout=5).text
        assert f'forgeml_latency_objective_seconds{{model="{NAME}"}} 0.3' in metrics
    log = deployments.log_dir(workspace, NAME) / "r1-primary-1.log"
    assert log.is_file()
    assert deployments.get_deployment(workspace, NAME) == deployed
    assert [d.name for d in deployments.list_deployments(workspace)] == [NAME]
    assert deployments.deployments_serving(workspace, "adult-mlp@v1") == [NAME]
    assert deployments.deployments_serving(workspace, "adult-mlp@v2") == []
    assert audit_actions(workspace, NAME) == ["deployment.create"]


@pytest.mark.slow
def test_the_same_spec_again_is_refused_and_starts_nothing(
    workspace: Workspace, deployed: deployments.Deployment
) -> None:
    before = sorted(server_pids(NAME))
    with pytest.raises(AlreadyExistsError, match="already runs this spec"):
        deployments.deploy(workspace, NAME, "adult-mlp@v1", replicas=2, latency_objective_ms=300)
    assert sorted(server_pids(NAME)) == before
    assert deployments.get_deployment(workspace, NAME).revision == 1


def _send_until(stop: threading.Event, workspace: Workspace, outcome: dict[str, Any]) -> None:
    """Send :predict to the replicas the records list now, until `stop` is set."""
    with httpx.Client(timeout=10) as client:
        while not stop.is_set():
            replicas = deployments.get_deployment(workspace, NAME).replicas
            url = replicas[outcome["sent"] % len(replicas)].url
            try:
                response = client.post(
                    f"{url}/v1/models/{NAME}:predict", json={"instances": adult_records(1)}
                )
                if response.status_code != 200:
                    outcome["failures"].append(f"{url}: {response.status_code} {response.text}")
            except httpx.HTTPError as error:
                outcome["failures"].append(f"{url}: {error!r}")
            outcome["sent"] += 1


@pytest.mark.slow
def test_redeploy_with_v2_and_a_canary_switches_revision_without_failed_requests(
    workspace: Workspace, deployed: deployments.Deployment
) -> None:
    old_pids = [r.pid for r in deployed.replicas]
    outcome: dict[str, Any] = {"sent": 0, "failures": []}
    stop = threading.Event()
    sender = threading.Thread(target=_send_until, args=(stop, workspace, outcome))
    sender.start()
    try:
        updated = deployments.deploy(
            workspace,
            NAME,
            "adult-mlp@v2",
            canary="adult-small@v1",
            canary_weight=25,
            drain_seconds=1.0,
        )
        switched = outcome["sent"]
        wait_until(lambda: outcome["sent"] >= switched + 5, 60, "requests to the new replicas")
    finally:
        stop.set()
        sender.join(timeout=30)
    assert outcome["failures"] == []
    assert outcome["sent"] > 10
    assert updated.revision == 2 and updated.status == "ready"
    assert updated.spec.model == "adult-mlp@v2"
    assert updated.spec.canary is not None
    assert (updated.spec.canary.model, updated.spec.canary.weight) == ("adult-small@v1", 25)
    assert [(r.role, r.model_ref) for r in updated.replicas] == [
        ("primary", "adult-mlp@v2"),
        ("canary", "adult-small@v1"),
    ]
    assert set(old_pids).isdisjoint(server_pids(NAME))
    assert sorted(server_pids(NAME)) == sorted(r.pid for r in updated.replicas if r.pid)
    for replica in updated.replicas:
        predict(replica.url)
    assert deployments.deployments_serving(workspace, "adult-mlp@v1") == []
    assert deployments.deployments_serving(workspace, "adult-small@v1") == [NAME]
    assert audit_actions(workspace, NAME)[-1] == "deployment.update"


@pytest.mark.slow
def test_rollback_reapplies_revision_1_as_revision_3_on_fresh_ports(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the first port handed out is taken before the server binds it (the free-port race):
    # that replica must be started again on another port
    with socket.create_server(("127.0.0.1", 0)) as taken:
        taken_port = taken.getsockname()[1]
        ports = iter([taken_port])
        free_port = _supervisor.free_port
        monkeypatch.setattr(_supervisor, "free_port", lambda: next(ports, None) or free_port())
        rolled = deployments.rollback(workspace, NAME, drain_seconds=0.2)
    assert taken_port not in {r.port for r in rolled.replicas}
    first_log = deployments.log_dir(workspace, NAME) / "r3-primary-1.log"
    assert f"Cannot listen on 127.0.0.1:{taken_port}" in first_log.read_text()
    assert rolled.revision == 3
    assert rolled.spec.model == "adult-mlp@v1" and rolled.spec.canary is None
    assert [(r.role, r.model_ref, r.status) for r in rolled.replicas] == [
        ("primary", "adult-mlp@v1", "ready")
    ] * 2
    with workspace.store.session() as session:
        specs = {
            row.revision: row.spec for row in session.scalars(select(DeploymentRevisionRecord))
        }
    assert sorted(specs) == [1, 2, 3] and specs[3] == specs[1]
    assert sorted(server_pids(NAME)) == sorted(r.pid for r in rolled.replicas if r.pid)
    predict(rolled.replicas[0].url)
    assert deployments.deployments_serving(workspace, "adult-mlp@v1") == [NAME]
    assert audit_actions(workspace, NAME)[-1] == "deployment.rollback"
    with pytest.raises(UsageError, match="already at revision 3"):
        deployments.rollback(workspace, NAME, to_revision=3)
    with pytest.raises(NotFoundError, match="has no revision 7"):
        deployments.rollback(workspace, NAME, to_revision=7)


@pytest.mark.slow
def test_a_redeploy_that_cannot_start_leaves_the_current_revision_serving(
    workspace: Workspace,
) -> None:
    before = deployments.get_deployment(workspace, NAME)
    # adult-mlp@v2 has no model.onnx, so an onnx server cannot load it
    with pytest.raises(ServiceUnavailableError, match="did not start") as caught:
        deployments.deploy(workspace, NAME, "adult-mlp@v2", runtime="onnx")
    assert "\n" not in str(caught.value)
    after = deployments.get_deployment(workspace, NAME)
    assert (after.revision, after.status, after.spec) == (before.revision, "ready", before.spec)
    assert after.replicas == before.replicas
    assert sorted(server_pids(NAME)) == sorted(r.pid for r in before.replicas if r.pid)
    predict(after.replicas[0].url)
    assert after.error is not None and "its primary replica (adult-mlp@v2) exited" in after.error
    log = deployments.log_dir(workspace, NAME) / f"r{before.revision + 1}-primary-1.log"
    assert log.read_text().strip().splitlines()[-1] in after.error
    assert audit_actions(workspace, NAME)[-1] == "deployment.fail"


@pytest.mark.slow
def test_check_marks_a_killed_replica_stopped_and_the_deployment_degraded(
    workspace: Workspace,
) -> None:
    before = deployments.get_deployment(workspace, NAME)
    victim, survivor = before.replicas
    assert victim.pid is not None
    os.kill(victim.pid, signal.SIGKILL)
    psutil.wait_procs([psutil.Process(victim.pid)], timeout=10)
    checked = {d.name: d for d in deployments.check(workspace)}[NAME]
    statuses = {r.port: r.status for r in checked.replicas}
    assert statuses == {victim.port: "stopped", survivor.port: "ready"}
    assert checked.status == "degraded"
    assert all(r.checked_at is not None for r in checked.replicas)
    assert audit_actions(workspace, "deployments")[-1] == "deployment.check"


@pytest.mark.slow
def test_delete_stops_every_replica_and_marks_it_deleted(workspace: Workspace) -> None:
    pids = [r.pid for r in deployments.get_deployment(workspace, NAME).replicas]
    deleted = deployments.delete(workspace, NAME)
    assert deleted.status == "deleted" and deleted.replicas == []
    assert server_pids(NAME) == []
    assert not any(pid is not None and alive(pid) for pid in pids)
    assert deployments.list_deployments(workspace) == []
    assert [d.name for d in deployments.list_deployments(workspace, include_deleted=True)] == [NAME]
    assert audit_actions(workspace, NAME)[-1] == "deployment.delete"
    with pytest.raises(NotFoundError, match="was deleted"):
        deployments.delete(workspace, NAME)


# The keep tests walk a second deployment (KEEP) in file order: a canary start keeps the
# primary, a rollback keeps it and stops the canary, changed serve arguments and --force
# restart it, and a replica the autoscaler drains meanwhile is started again.
KEEP = "dep-keep"


def audit_payload(workspace: Workspace, ref: str) -> dict[str, Any]:
    with workspace.store.session() as session:
        events = session.scalars(select(AuditEvent).where(AuditEvent.object_ref == ref))
        return dict(list(events)[-1].payload)


@pytest.fixture(scope="module")
def keep_primary(workspace: Workspace) -> Iterator[deployments.Deployment]:
    try:
        yield deployments.deploy(workspace, KEEP, "adult-mlp@v1", ready_timeout=120)
    finally:
        kill_servers(KEEP)


def primary_pid(deployment: deployments.Deployment) -> int | None:
    return next(r.pid for r in deployment.replicas if r.role == "primary")


@pytest.mark.slow
def test_a_canary_start_keeps_the_primary_and_starts_only_the_canary(
    workspace: Workspace, keep_primary: deployments.Deployment
) -> None:
    pid = primary_pid(keep_primary)
    updated = deployments.deploy(
        workspace, KEEP, "adult-mlp@v1", canary="adult-small@v1", drain_seconds=0
    )
    assert updated.revision == 2
    assert [(r.role, r.model_ref, r.status) for r in updated.replicas] == [
        ("primary", "adult-mlp@v1", "ready"),
        ("canary", "adult-small@v1", "ready"),
    ]
    kept, first = updated.replicas[0], keep_primary.replicas[0]
    assert (kept.pid, kept.port) == (pid, first.port)
    assert sorted(server_pids(KEEP)) == sorted(r.pid for r in updated.replicas if r.pid)
    logs = sorted(p.name for p in deployments.log_dir(workspace, KEEP).glob("r2-*.log"))
    assert logs == ["r2-canary-2.log"]
    predict(updated.replicas[1].url, KEEP)
    payload = audit_payload(workspace, KEEP)
    assert payload["kept"] == [updated.replicas[0].url]
    assert payload["replicas"] == [r.url for r in updated.replicas]


@pytest.mark.slow
def test_a_rollback_that_drops_the_canary_keeps_the_primary_and_stops_the_canary(
    workspace: Workspace, keep_primary: deployments.Deployment
) -> None:
    before = deployments.get_deployment(workspace, KEEP)
    canary = before.replicas[1].pid
    assert canary is not None
    rolled = deployments.rollback(workspace, KEEP, drain_seconds=0)
    assert rolled.revision == 3 and rolled.spec.canary is None
    assert [(r.role, r.pid) for r in rolled.replicas] == [("primary", primary_pid(keep_primary))]
    assert not alive(canary)
    assert server_pids(KEEP) == [primary_pid(keep_primary)]
    assert list(deployments.log_dir(workspace, KEEP).glob("r3-*.log")) == []
    predict(rolled.replicas[0].url, KEEP)


@pytest.mark.slow
def test_changed_serve_arguments_restart_the_primary(
    workspace: Workspace, keep_primary: deployments.Deployment
) -> None:
    old = primary_pid(keep_primary)
    assert old is not None
    updated = deployments.deploy(workspace, KEEP, "adult-mlp@v1", max_batch_size=8, drain_seconds=0)
    assert primary_pid(updated) not in (None, old) and not alive(old)
    assert server_pids(KEEP) == [primary_pid(updated)]
    assert audit_payload(workspace, KEEP)["kept"] == []


@pytest.mark.slow
def test_force_restarts_a_replica_that_could_be_kept(workspace: Workspace) -> None:
    old = primary_pid(deployments.get_deployment(workspace, KEEP))
    assert old is not None
    forced = deployments.deploy(
        workspace, KEEP, "adult-mlp@v1", max_batch_size=8, force=True, drain_seconds=0
    )
    assert primary_pid(forced) not in (None, old) and not alive(old)
    assert server_pids(KEEP) == [primary_pid(forced)]


@pytest.mark.slow
def test_a_kept_replica_drained_before_the_switch_is_started_again(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from forgeml.serve.deployments import _control, _replicas

    old = primary_pid(deployments.get_deployment(workspace, KEEP))
    keepable = _control._keepable

    def drained_meanwhile(*args: Any) -> dict[int, Any]:
        kept = keepable(*args)
        assert [replica.pid for replica in kept.values()] == [old]
        for replica in kept.values():  # the autoscaler takes it out of the routes
            _replicas.set_status(workspace, KEEP, replica.row_id, _replicas.DRAINING)
        return kept

    monkeypatch.setattr(_control, "_keepable", drained_meanwhile)
    updated = deployments.deploy(
        workspace, KEEP, "adult-mlp@v1", replicas=2, max_batch_size=8, drain_seconds=0
    )
    assert [(r.role, r.status) for r in updated.replicas] == [("primary", "ready")] * 2
    assert old not in {r.pid for r in updated.replicas} and old is not None and not alive(old)
    assert sorted(server_pids(KEEP)) == sorted(r.pid for r in updated.replicas if r.pid)
    assert audit_payload(workspace, KEEP)["kept"] == []


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"model_ref": "no-such-model"}, NotFoundError, "not registered"),
        ({"model_ref": "adult-mlp@v9"}, NotFoundError, "no version v9"),
        ({"replicas": 0}, ConfigError, "at least 1"),
        ({"canary": "adult-small@v1", "canary_weight": 150}, ConfigError, "0 to 100"),
        ({"canary_weight": 20}, ConfigError, "needs a canary model"),
        ({"runtime": "tensorrt"}, ConfigError, "torch or onnx"),
        ({"latency_objective_ms": 0}, ConfigError, "more than 0 ms"),
        ({"log_sample_rate": 1.5}, ConfigError, "share from 0 to 1"),
        ({"name": "../escape"}, InvalidNameError, "Invalid deployment name"),
        ({"shadow": "adult-mlp@nosuchalias"}, NotFoundError, "no alias"),
    ],
)
def test_bad_deploy_options_are_refused_before_anything_starts(
    workspace: Workspace, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {"name": "dep-bad", "model_ref": "adult-mlp@v1", **options}
    with pytest.raises(error, match=message):
        deployments.deploy(workspace, **arguments)
    assert server_pids(arguments["name"]) == []
    with pytest.raises(NotFoundError):
        deployments.get_deployment(workspace, arguments["name"])


@pytest.mark.parametrize("action", ["get", "rollback", "delete"])
def test_an_unknown_deployment_is_not_found(workspace: Workspace, action: str) -> None:
    call = {
        "get": deployments.get_deployment,
        "rollback": deployments.rollback,
        "delete": deployments.delete,
    }[action]
    with pytest.raises(NotFoundError, match="No deployment is named 'nowhere'"):
        call(workspace, "nowhere")


def test_spec_json_matches_the_gateway_contract() -> None:
    spec = deployments.DeploymentSpec(
        model="a@v2",
        model_ref="a@production",
        replicas=2,
        canary=deployments.CanarySpec(model="b@v1", weight=10, replicas=1),
        shadow=deployments.ShadowSpec(model="c@v3"),
    )
    assert spec.model_dump() == {
        "model": "a@v2",
        "model_ref": "a@production",
        "replicas": 2,
        "canary": {"model": "b@v1", "weight": 10, "replicas": 1},
        "shadow": {"model": "c@v3"},
        "runtime": "torch",
        "max_batch_size": None,
        "max_wait_ms": None,
        "latency_objective_ms": None,
        "log_sample_rate": None,
        "autoscale": None,  # the gateway waits for a cold start when it is set
        "rag": [],  # RAG index versions every replica serves (`forgeml serve --rag`)
    }
    assert spec.plan() == [
        ("primary", "a@v2"),
        ("primary", "a@v2"),
        ("canary", "b@v1"),
        ("shadow", "c@v3"),
    ]


def test_the_primaries_and_canaries_log_to_the_shared_log_but_not_the_shadow() -> None:
    from forgeml.serve.deployments._control import server_args

    spec = deployments.DeploymentSpec(
        model="a@v2",
        model_ref="a",
        canary=deployments.CanarySpec(model="b@v1", weight=10, replicas=1),
        shadow=deployments.ShadowSpec(model="c@v3"),
        log_sample_rate=1.0,
    )
    logged = {role: server_args("dep", spec, model, role) for role, model in spec.plan()}
    assert logged["primary"][-2:] == logged["canary"][-2:] == ["--log-sample-rate", "1"]
    assert "--log-sample-rate" not in logged["shadow"]
    unlogged = spec.model_copy(update={"log_sample_rate": None})
    assert "--log-sample-rate" not in server_args("dep", unlogged, "a@v2", "primary")


def test_every_replica_serves_the_rag_indexes_the_spec_names() -> None:
    from forgeml.serve.deployments._control import server_args

    spec = deployments.DeploymentSpec(
        model="a@v2",
        model_ref="a",
        canary=deployments.CanarySpec(model="b@v1", weight=10, replicas=1),
        rag=["std@v1", "faq@v3"],
    )
    for role, model in spec.plan():
        assert server_args("dep", spec, model, role)[-4:] == ["--rag", "std@v1", "--rag", "faq@v3"]
    # a spec stored before `rag` existed reads back as serving none, and equal to a new one
    stored = spec.model_dump(exclude={"rag", "canary"})
    assert deployments.DeploymentSpec.model_validate(stored) == spec.model_copy(
        update={"rag": [], "canary": None}
    )


def test_a_replica_environment_matches_on_where_it_records_and_what_it_imports(
    tmp_path: Path,
) -> None:
    from forgeml.serve.deployments._control import _serving_env

    home = str(tmp_path / "home")
    plain = {"FORGEML_HOME": home, "FORGEML_USER": "alice", "PYTHONPATH": "/src"}
    # a pipeline job names the default store and artifacts explicitly, under another user
    job = {
        **plain,
        "FORGEML_USER": "pipeline",
        "FORGEML_JOB_ID": "j1",
        "CUDA_VISIBLE_DEVICES": "",
        "FORGEML_DB_URL": f"sqlite:///{tmp_path / 'home' / 'forgeml.db'}",
        "FORGEML_ARTIFACTS_URL": str(tmp_path / "home" / "artifacts"),
    }
    assert _serving_env(job) == _serving_env(plain)
    for change in (
        {"FORGEML_DB_URL": "postgresql://db/forgeml"},
        {"FORGEML_HOME": str(tmp_path / "other")},
        {"PYTHONPATH": "/elsewhere"},
    ):
        assert _serving_env({**plain, **change}) != _serving_env(plain)


@pytest.mark.slow
def test_a_team_b_deployments_replicas_act_in_team_b_however_they_are_started(
    workspace: Workspace, tmp_path: Path
) -> None:
    from forgeml.rag import IndexOptions, build_version
    from forgeml.serve.deployments import _replicas

    # a RAG index of team-b: a replica serves it only when it acts in team-b
    # (`forgeml serve --rag` refuses another project's index, and the replica fails)
    in_b = workspace.in_project("team-b")
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "b.md").write_text("# Team B\n\nTeam B keeps its runbooks here.\n")
    build_version(in_b, "kb-b", [str(tmp_path / "kb")], IndexOptions(chunk_tokens=64))
    name = "dep-team-b"
    # a deployment serves its own project's models only: adult-mlp is team-b's for the test
    _move_model(workspace, "adult-mlp", "team-b")
    try:
        deployed = deployments.deploy(
            in_b, name, "adult-mlp@v1", rag=["kb-b@v1"], min_replicas=1, max_replicas=2
        )
        # what the autoscaler starts, from its loop's workspace (acting in default)
        [scaled] = [d for d in _replicas.autoscaled(workspace) if d.name == name]
        spawned = _replicas.spawn_primary(workspace, name, scaled)
        wait_until(
            lambda: _supervisor.probe(spawned.url) or not alive(spawned.pid),
            120,
            "the scaled replica's start",
        )
        assert _supervisor.probe(spawned.url), _supervisor.log_tail(spawned.log_path)

        [replica] = deployed.replicas
        for url, pid in [(replica.url, replica.pid), (spawned.url, spawned.pid)]:
            assert psutil.Process(pid).environ()["FORGEML_PROJECT"] == "team-b"
            answer = httpx.post(f"{url}/v1/rag/kb-b/query", json={"query": "runbooks"}, timeout=30)
            assert answer.status_code == 200, answer.text
            assert [hit["source"] for hit in answer.json()["hits"]] == ["kb/b.md"]
    finally:
        kill_servers(name)
        _move_model(workspace, "adult-mlp", "default")


def _move_model(workspace: Workspace, name: str, project: str) -> None:
    """Every version of model `name` into `project` (the shared model's for one test)."""
    with workspace.store.session() as session:
        session.execute(
            update(ModelVersionRecord)
            .where(ModelVersionRecord.name == name)
            .values(project=project)
        )
