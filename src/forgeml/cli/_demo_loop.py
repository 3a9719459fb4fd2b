"""The closed loop in `forgeml demo`: drift -> alert -> retrain -> gate -> canary -> promote.

The Adult model serves as deployment `adult`, every request logged. A policy says: when
ForgemlDriftDetected fires for it, prepare the newest data (clean, validate, split,
features), retrain the champion's recorded config on it, gate the challenger against the
champion on the new test split, run it as a canary under live traffic, then promote it.
A `forgeml server` process runs the loop (its monitor gauges, alert rules, trigger and
the pipeline's jobs); this process plays the world: new labelled data arrives (older
people working longer hours, a different mix of sexes, and in that group everyone with
some college now earning >50K), and a request stream shifted the same way reaches the
deployment. The
timeline is printed at the end; the server and the deployment are stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from forgeml.cli._output import print_table, say
from forgeml.core.errors import ServiceUnavailableError

if TYPE_CHECKING:
    import httpx
    import polars as pl

    from forgeml.core.workspace import Workspace

DEPLOYMENT = "adult"
POLICY = "adult"
LOOP_TIMEOUT_S = 600.0
_RECIPES = Path("examples/adult")


def _shifted(frame: pl.DataFrame, rows: int, seed: int, relabel: bool) -> pl.DataFrame:
    """`rows` rows drawn with weight on older people working long hours and on women; with
    `relabel`, the relation changed too: in that group, everyone with at least some college
    (education-num >= 10) now earns >50K."""
    import numpy as np
    import polars as pl

    older = (frame["age"] >= 45).to_numpy() & (frame["hours-per-week"] >= 45).to_numpy()
    women = (frame["sex"] == "Female").to_numpy()
    weights = 1.0 + 12.0 * older + 2.0 * women
    generator = np.random.default_rng(seed)
    picked = generator.choice(frame.height, size=rows, replace=True, p=weights / weights.sum())
    # new people, not copies of old rows (cleaning drops exact duplicates): each a little
    # older, working a little longer, with its own census weight
    drawn = frame[picked].with_columns(
        (pl.col("age") + pl.Series(generator.integers(0, 4, rows))).clip(17, 90),
        (pl.col("hours-per-week") + pl.Series(generator.integers(0, 6, rows))).clip(1, 99),
        (pl.col("fnlwgt") * pl.Series(generator.uniform(0.8, 1.2, rows))).round().cast(pl.Int64),
    )
    if relabel:
        changed = (
            (pl.col("age") >= 45)
            & (pl.col("hours-per-week") >= 45)
            & (pl.col("education-num") >= 10)
        )
        drawn = drawn.with_columns(
            pl.when(changed).then(pl.lit(">50K")).otherwise(pl.col("Y")).alias("Y")
        )
    return drawn


def _prepare_steps() -> dict[str, Any]:
    """The preparation pipeline: the demo's own data recipes on the newest raw version."""
    from forgeml.core.configfile import load_yaml

    def recipe(name: str) -> Any:
        return load_yaml(_RECIPES / name)

    return {
        "name": "adult-prepare",
        "steps": [
            {
                "name": "clean",
                "kind": "data",
                "derive": "clean",
                "dataset": "adult",
                "params": recipe("clean.yaml"),
            },
            {
                "name": "validate",
                "kind": "data",
                "derive": "validate",
                "dataset": "${steps.clean.dataset}",
                "params": recipe("expectations.yaml"),
            },
            {
                "name": "split",
                "kind": "data",
                "derive": "split",
                "dataset": "${steps.validate.dataset}",
                "params": {"ratios": [0.8, 0.1, 0.1], "stratify": "Y", "seed": 0},
            },
            {
                "name": "features",
                "kind": "data",
                "derive": "features",
                "dataset": "${steps.split.dataset}",
                "params": recipe("features.yaml"),
            },
        ],
    }


def _policy(model_name: str) -> dict[str, Any]:
    return {
        "name": POLICY,
        "deployment": DEPLOYMENT,
        "model": f"{model_name}@production",
        "on_alerts": ["ForgemlDriftDetected"],
        "retrain": {
            "prepare": "prepare.yaml",
            "data": "${steps.split.dataset}",
            "overrides": ["data.feature_spec=adult-features"],
        },
        "gate": {"metric": "accuracy", "margin": 0.001, "slices": {"sex": 0.05}},
        "canary": {
            "weight": 25,
            "seconds": 20,
            "min_requests": 20,
            "poll_seconds": 1,
            "bounds": {"max_error_rate": 0.01, "max_p99_ms": 500},
        },
    }


class _Stream:
    """Batches of records to the deployment's replicas from a thread: the live traffic."""

    def __init__(self, workspace: Workspace, records: list[dict[str, Any]]) -> None:
        self.workspace = workspace
        self.records = records
        self.sent = 0
        self.failed = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="demo-stream", daemon=True)

    def __enter__(self) -> _Stream:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(30)

    def _run(self) -> None:
        import httpx

        from forgeml.serve.deployments import get_deployment

        position = 0
        with httpx.Client(timeout=30.0) as client:
            while not self.stop.is_set():
                for replica in get_deployment(self.workspace, DEPLOYMENT).replicas:
                    if replica.role == "shadow":
                        continue
                    batch = [self.records[(position + i) % len(self.records)] for i in range(25)]
                    position += len(batch)
                    self._send(client, f"{replica.url}/v1/models/{DEPLOYMENT}:predict", batch)
                self.stop.wait(0.05)

    def _send(self, client: httpx.Client, url: str, batch: list[dict[str, Any]]) -> None:
        import httpx

        try:
            answer = client.post(url, json={"instances": batch})
        except httpx.HTTPError:  # a replica of a revision being replaced
            self.failed += 1
            return
        if answer.status_code == 200:
            self.sent += len(batch)
        else:
            self.failed += 1


def start_server(
    home: Path, folder: Path, alerts: str = "interval_s: 2\n", cycle: str = "0.5"
) -> subprocess.Popen[bytes]:
    """`forgeml server` on `home` (its log in `folder`): a scheduler cycle every `cycle`
    seconds, alerts as the `alerts` config says, the gauges every `alerts`' interval."""
    import yaml

    (folder / "alerts.yaml").write_text(alerts)
    interval = yaml.safe_load(alerts)["interval_s"]
    command = [
        str(Path(sys.executable).with_name("forgeml")),
        "server",
        "--interval",
        cycle,
        "--monitor-interval",
        str(interval),
        "--alert-config",
        str(folder / "alerts.yaml"),
    ]
    env = {**os.environ, "FORGEML_HOME": str(home)}
    with (folder / "server.log").open("ab") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)


def _canary_state(workspace: Workspace) -> str | None:
    from sqlalchemy import select

    from forgeml.core.store import PipelineRunRecord, PipelineStepRunRecord

    with workspace.store.session() as session:
        run = session.scalars(  # the first loop: the demo stops after it
            select(PipelineRunRecord)
            .where(PipelineRunRecord.name == f"policy-{POLICY}")
            .order_by(PipelineRunRecord.created_at)
        ).first()
        if run is None:
            return None
        if run.state in ("SUCCEEDED", "FAILED"):
            return run.state
        step = session.scalar(
            select(PipelineStepRunRecord.state).where(
                PipelineStepRunRecord.run_id == run.id, PipelineStepRunRecord.name == "canary"
            )
        )
        return f"running ({step})" if step else "running"


def loop_demo(
    workspace: Workspace,
    model_name: str,
    raw_ref: str,
    test_ref: str,
    canary: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the loop on `model_name@production` (see the module docstring); its timings.

    Args:
        canary: the policy's canary section instead of the demo's (benchmarks/closed_loop.py
            breaks a bound with it to time a rollback).
    """
    from forgeml.data import catalog, pipeline
    from forgeml.data.ingest import IngestOptions
    from forgeml.monitor.loop import apply_policy, remove_policy
    from forgeml.serve.deployments import delete, deploy

    home = Path(workspace.settings.home).resolve()
    folder = Path(tempfile.mkdtemp(prefix="loop-", dir=home))
    say(
        f"[bold]the loop[/bold]: deploying {model_name}@production as '{DEPLOYMENT}', "
        "every request logged ..."
    )
    deploy(workspace, DEPLOYMENT, f"{model_name}@production", log_sample_rate=1.0, force=True)
    server = None
    try:
        (folder / "prepare.yaml").write_text(yaml.safe_dump(_prepare_steps(), sort_keys=False))
        policy = _policy(model_name) | ({"canary": canary} if canary is not None else {})
        (folder / "policy.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
        trigger = apply_policy(workspace, folder / "policy.yaml")
        say(f"policy '{POLICY}': {trigger.subject} -> prepare, retrain, gate, canary")
        with workspace.store.session() as session:
            raw = catalog.read_frame(workspace, catalog.resolve(session, raw_ref))
            test = catalog.read_frame(workspace, catalog.resolve(session, test_ref))
        fields = [c for c in test.columns if c != "Y"]
        server = start_server(home, folder)
        with _Stream(workspace, test.select(fields).drop_nulls().head(3000).to_dicts()) as calm:
            _wait(lambda: calm.sent >= 2000, 120, "the calm stream")
        arrived = raw.vstack(_shifted(raw, 12000, seed=1, relabel=True))
        arrived.write_csv(folder / "adult-new.csv")
        new = pipeline.add(workspace, "adult", folder / "adult-new.csv", IngestOptions()).version
        say(
            f"new labelled data: {new.ref} ({new.rows} rows; 12,000 new ones shifted in age, "
            "hours and sex, and the older long-hours group with some college earning >50K)"
        )
        shifted = _shifted(test.drop_nulls(), 4000, seed=2, relabel=False).select(fields)
        onset = datetime.now(UTC)
        say("the request stream shifts the same way; waiting for the loop ...")
        with _Stream(workspace, shifted.to_dicts()) as stream:
            _wait(
                lambda: _canary_state(workspace) in ("SUCCEEDED", "FAILED"),
                LOOP_TIMEOUT_S,
                "the loop",
                server,
            )
        timings = _report(workspace, model_name, onset, stream)
        remove_policy(workspace, POLICY)  # one loop for the demo: later alerts start none
        say(
            f"policy '{POLICY}' removed after its loop (apply it again with `forgeml monitor "
            f"policy apply {folder / 'policy.yaml'}`)"
        )
    finally:
        if server is not None:
            server.terminate()
            server.wait(60)
        delete(workspace, DEPLOYMENT, grace_seconds=5.0)
    say(f"server and deployment stopped; the server's log: {folder / 'server.log'}")
    return timings


def _wait(
    done: Any, timeout: float, what: str, server: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if server is not None and server.poll() is not None:
            raise ServiceUnavailableError(f"forgeml server stopped during {what}.")
        if time.monotonic() > deadline:
            raise ServiceUnavailableError(f"{what} did not finish within {timeout:.0f} s.")
        time.sleep(0.5)


def _report(
    workspace: Workspace, model_name: str, onset: datetime, stream: _Stream
) -> dict[str, Any]:
    from forgeml.monitor.loop import loop_timeline
    from forgeml.tracking import get_model_version

    events = loop_timeline(workspace, POLICY)
    rows = [(f"+{(e.at - onset).total_seconds():6.1f} s", e.what, e.detail[:90]) for e in events]
    print_table("the loop's timeline (from the shift's onset)", ["at", "what", "detail"], rows)
    fired = next((e.at for e in events if e.what.startswith("alert ")), None)
    ended = next((e for e in events if e.what in ("canary succeeded", "canary failed")), None)
    production = get_model_version(workspace, f"{model_name}@production").ref
    timings: dict[str, Any] = {
        "production": production,
        "served_rows": stream.sent,
        "failed_requests": stream.failed,
    }
    if fired is None or ended is None:
        say("the loop did not reach its canary; `forgeml monitor policy show adult` says why")
        return timings
    outcome = "promoted" if ended.what == "canary succeeded" else "rolled back"
    timings |= {
        "outcome": outcome,
        "onset_to_alert_s": (fired - onset).total_seconds(),
        "alert_to_canary_end_s": (ended.at - fired).total_seconds(),
    }
    say(
        f"drift onset -> alert {timings['onset_to_alert_s']:.0f} s; alert -> canary "
        f"{outcome} {timings['alert_to_canary_end_s']:.0f} s; @production is {production}; "
        f"{stream.sent} shifted rows served, {stream.failed} failed requests"
    )
    return timings
