from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from forgeml.core.errors import ForgemlError
from forgeml.core.store import (
    AuditEvent,
    JobRecord,
    PipelineFiringRecord,
    PipelineRunRecord,
    PipelineTriggerRecord,
)
from forgeml.core.workspace import Workspace
from forgeml.data import pipeline as data_pipeline
from forgeml.data.ingest import IngestOptions
from forgeml.pipelines import find_run
from forgeml.pipelines.triggers import (
    MAX_EVENTS_PER_EVALUATION,
    add_trigger,
    evaluate_triggers,
    list_firings,
    list_triggers,
    remove_trigger,
)
from forgeml.scheduler._records import job_dir
from forgeml.scheduler.contract import Outcome, read_result, result_path
from forgeml.scheduler.executors.local import LocalExecutor
from forgeml.scheduler.jobs import find_job
from forgeml.scheduler.service import Scheduler
from tests.data.conftest import write_table_csv
from tests.pipelines.conftest import write_pipeline
from tests.scheduler.conftest import run_to_end

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

HELLO = """
name: hello
params:
  greeting: hi
steps:
  - name: write
    kind: command
    argv:
      - PYTHON
      - -c
      - "import sys; open('hello.txt', 'w').write(sys.argv[1])"
      - ${params.greeting}
    outputs:
      text: hello.txt
  - name: shout
    kind: command
    argv:
      - PYTHON
      - -c
      - "import sys; open('loud.txt', 'w').write(open(sys.argv[1]).read().upper())"
      - ${steps.write.text}
    outputs:
      text: loud.txt
"""


class Recorder:
    """A submit that records the fields and makes up job ids (raises once when asked)."""

    def __init__(self, fail_first: bool = False) -> None:
        self.fields: list[dict[str, Any]] = []
        self.fail_first = fail_first

    def __call__(self, _workspace: Workspace, fields: dict[str, Any]) -> str:
        if self.fail_first:
            self.fail_first = False
            raise RuntimeError("the process died before the job was recorded")
        self.fields.append(fields)
        return f"job{len(self.fields)}"

    @property
    def events(self) -> list[str]:
        return [json.loads(fields["command"][-1])["event"] for fields in self.fields]


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    return write_pipeline(tmp_path, HELLO)


def counts(workspace: Workspace) -> dict[str, int]:
    tables = (AuditEvent, JobRecord, PipelineTriggerRecord, PipelineFiringRecord)
    with workspace.store.session() as session:
        return {
            table.__tablename__: session.scalar(select(func.count()).select_from(table)) or 0
            for table in tables
        }


def add_version(workspace: Workspace, folder: Path, rows: int) -> str:
    source = write_table_csv(folder / "small.csv", rows=rows)
    return data_pipeline.add(workspace, "small", source, IngestOptions()).version.ref


def test_a_cron_trigger_fires_each_slot_once(pipe_workspace: Workspace, hello: Path) -> None:
    add_trigger(pipe_workspace, "every5", hello, cron="*/5 * * * *", now=T0)
    submit = Recorder()

    fired = evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=12), submit=submit)
    again = evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=12), submit=submit)

    assert [f.event for f in fired] == ["2026-12-03T12:05:00+00:00", "2026-12-03T12:10:00+00:00"]
    assert [f.job_id for f in fired] == ["job1", "job2"]
    assert again == []
    assert submit.events == [f.event for f in fired]
    assert [f.event for f in list_firings(pipe_workspace, "every5")] == [
        "2026-12-03T12:10:00+00:00",
        "2026-12-03T12:05:00+00:00",
    ]


def test_a_restarted_evaluator_never_fires_an_event_twice(
    pipe_workspace: Workspace, hello: Path
) -> None:
    add_trigger(pipe_workspace, "every5", hello, cron="*/5 * * * *", now=T0)
    submit = Recorder()
    evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=7), submit=submit)

    restarted = Workspace(pipe_workspace.settings)  # a new server process on the same store
    try:
        evaluate_triggers(restarted, T0 + timedelta(minutes=7), submit=submit)
        evaluate_triggers(restarted, T0 + timedelta(minutes=11), submit=submit)
    finally:
        restarted.close()

    assert submit.events == ["2026-12-03T12:05:00+00:00", "2026-12-03T12:10:00+00:00"]


def test_a_crash_between_firing_and_submitting_is_recovered_once(
    pipe_workspace: Workspace, hello: Path
) -> None:
    add_trigger(pipe_workspace, "every5", hello, cron="*/5 * * * *", now=T0)
    crashing = Recorder(fail_first=True)
    with pytest.raises(RuntimeError):
        evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=6), submit=crashing)
    assert [f.job_id for f in list_firings(pipe_workspace)] == [None]

    recovered = evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=6), submit=crashing)
    evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=6), submit=crashing)

    assert [f.job_id for f in recovered] == ["job1"]
    assert crashing.events == ["2026-12-03T12:05:00+00:00"]
    assert [f.job_id for f in list_firings(pipe_workspace)] == ["job1"]


def test_a_job_submitted_before_a_crash_is_found_not_submitted_again(
    pipe_workspace: Workspace, hello: Path
) -> None:
    add_trigger(pipe_workspace, "every5", hello, cron="*/5 * * * *", now=T0)

    def submit_then_die(workspace: Workspace, fields: dict[str, Any]) -> str:
        from forgeml.pipelines.triggers import submit_run_job

        submit_run_job(workspace, fields)
        raise RuntimeError("the process died before the job id was recorded")

    with pytest.raises(RuntimeError):
        evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=6), submit=submit_then_die)
    never = Recorder()
    recovered = evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=6), submit=never)

    assert never.fields == []
    with pipe_workspace.store.session() as session:
        jobs = list(session.scalars(select(JobRecord.id)))
    assert [f.job_id for f in recovered] == jobs
    assert len(jobs) == 1


def test_a_long_downtime_fires_the_oldest_slots_first_a_few_at_a_time(
    pipe_workspace: Workspace, hello: Path
) -> None:
    add_trigger(pipe_workspace, "minutely", hello, cron="* * * * *", now=T0)
    submit = Recorder()
    later = T0 + timedelta(minutes=25)

    first = evaluate_triggers(pipe_workspace, later, submit=submit)
    second = evaluate_triggers(pipe_workspace, later, submit=submit)
    third = evaluate_triggers(pipe_workspace, later, submit=submit)

    assert len(first) == len(second) == MAX_EVENTS_PER_EVALUATION
    assert len(third) == 5
    assert submit.events[0] == "2026-12-03T12:01:00+00:00"
    assert submit.events[-1] == "2026-12-03T12:25:00+00:00"
    assert len(set(submit.events)) == 25


def test_new_dataset_versions_fire_a_dataset_trigger_once_each(
    pipe_workspace: Workspace, hello: Path, tmp_path: Path
) -> None:
    add_version(pipe_workspace, tmp_path, rows=40)
    add_trigger(pipe_workspace, "on-small", hello, dataset="small")
    submit = Recorder()
    assert evaluate_triggers(pipe_workspace, submit=submit) == []

    second = add_version(pipe_workspace, tmp_path, rows=41)
    fired = evaluate_triggers(pipe_workspace, submit=submit)
    assert evaluate_triggers(pipe_workspace, submit=submit) == []
    third = add_version(pipe_workspace, tmp_path, rows=42)
    fired += evaluate_triggers(pipe_workspace, submit=submit)

    assert [f.event for f in fired] == [second, third] == ["small@v2", "small@v3"]
    assert submit.events == [second, third]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "every five minutes"}, "is not a cron expression"),
        ({"cron": "61 * * * *"}, "is not a cron expression"),
        ({"dataset": "nowhere"}, "Dataset 'nowhere' does not exist"),
        ({}, "exactly one of --cron EXPR, --on-dataset NAME, --on-alert RULE"),
        ({"cron": "* * * * *", "dataset": "small"}, "exactly one of"),
    ],
)
def test_bad_trigger_inputs_are_one_sentence_and_record_nothing(
    pipe_workspace: Workspace, hello: Path, options: dict[str, str], message: str
) -> None:
    before = counts(pipe_workspace)
    with pytest.raises(ForgemlError, match=message) as raised:
        add_trigger(pipe_workspace, "t", hello, **options)
    sentence = str(raised.value)
    assert sentence.endswith(".") and "\n" not in sentence
    assert counts(pipe_workspace) == before


def test_a_missing_or_invalid_pipeline_file_records_nothing(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    invalid = write_pipeline(tmp_path, "name: x\nsteps:\n  - name: a\n    kind: nope\n", "bad.yaml")
    before = counts(pipe_workspace)

    with pytest.raises(ForgemlError, match=r"missing\.yaml"):
        add_trigger(pipe_workspace, "t", tmp_path / "missing.yaml", cron="* * * * *")
    with pytest.raises(ForgemlError, match="unknown step kind 'nope'"):
        add_trigger(pipe_workspace, "t", invalid, cron="* * * * *")
    with pytest.raises(ForgemlError, match="--set"):
        add_trigger(pipe_workspace, "t", invalid, ["no-equals-sign"], cron="* * * * *")

    assert counts(pipe_workspace) == before


def test_a_duplicate_name_is_refused_and_remove_forgets_the_trigger(
    pipe_workspace: Workspace, hello: Path
) -> None:
    add_trigger(pipe_workspace, "every5", hello, cron="*/5 * * * *", now=T0)
    evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=5), submit=Recorder())
    before = counts(pipe_workspace)

    with pytest.raises(ForgemlError, match="Trigger 'every5' exists already"):
        add_trigger(pipe_workspace, "every5", hello, cron="* * * * *")
    assert counts(pipe_workspace) == before

    remove_trigger(pipe_workspace, "every5")
    assert list_triggers(pipe_workspace) == []
    assert list_firings(pipe_workspace) == []
    with pytest.raises(ForgemlError, match="There is no trigger 'every5'"):
        remove_trigger(pipe_workspace, "every5")


def test_a_trigger_keeps_its_file_absolute_and_its_overrides(
    pipe_workspace: Workspace, hello: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(hello.parent)
    add_trigger(pipe_workspace, "t", "pipeline.yaml", ["params.greeting=yo"], cron="* * * * *")

    (trigger,) = list_triggers(pipe_workspace)
    assert (trigger.file, trigger.overrides) == (str(hello), ["params.greeting=yo"])
    assert (trigger.kind, trigger.subject, trigger.created_by) == ("cron", "* * * * *", "tester")


@pytest.mark.slow
def test_a_fired_pipeline_runs_to_success_as_a_scheduler_job(
    pipe_workspace: Workspace, hello: Path
) -> None:
    add_trigger(pipe_workspace, "every5", hello, ["params.greeting=yo"], cron="*/5 * * * *", now=T0)
    (firing,) = evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=5))
    assert firing.job_id is not None
    scheduler = Scheduler(pipe_workspace, LocalExecutor(cpus=[0, 1], gpus=0))

    assert run_to_end(scheduler, firing.job_id, timeout=120) == "SUCCEEDED"

    job = find_job(pipe_workspace, firing.job_id)
    result = read_result(result_path(job_dir(pipe_workspace, job.id), job.attempts))
    assert result is not None and result.outcome == Outcome.SUCCEEDED
    with pipe_workspace.store.session() as session:
        run = session.get(PipelineRunRecord, result.outputs["pipeline_run"])
        assert run is not None and run.state == "SUCCEEDED"
        assert [step.state for step in run.steps] == ["SUCCEEDED", "SUCCEEDED"]
    assert (hello.parent / "loud.txt").read_text() == "YO"


def test_the_server_loop_evaluates_with_its_clock_until_stopped(
    pipe_workspace: Workspace, hello: Path
) -> None:
    import threading

    from forgeml.pipelines.triggers import serve_triggers

    add_trigger(pipe_workspace, "every5", hello, cron="*/5 * * * *", now=T0)
    stop = threading.Event()

    def clock() -> datetime:
        stop.set()  # one evaluation, then the loop ends without waiting
        return T0 + timedelta(minutes=5)

    serve_triggers(pipe_workspace, 60.0, stop, clock=clock)

    (firing,) = list_firings(pipe_workspace)
    assert firing.event == "2026-12-03T12:05:00+00:00" and firing.job_id is not None


@pytest.mark.slow
def test_forgeml_server_runs_the_pipeline_when_a_dataset_gets_a_new_version(
    tmp_path: Path, hello: Path
) -> None:
    import os
    import subprocess
    import sys

    from forgeml.core.config import Settings
    from tests._wait import wait_until

    env = {
        k: v for k, v in os.environ.items() if k not in ("FORGEML_DB_URL", "FORGEML_ARTIFACTS_URL")
    }
    env |= {"FORGEML_HOME": str(tmp_path / "home"), "FORGEML_USER": "tester"}
    workspace = Workspace(Settings(home=tmp_path / "home", user="tester"))
    add_version(workspace, tmp_path, rows=40)
    add_trigger(workspace, "on-small", hello, ["params.greeting=new"], dataset="small")
    forgeml = str(Path(sys.executable).with_name("forgeml"))
    with (tmp_path / "server.log").open("wb") as log:
        server = subprocess.Popen(
            [forgeml, "server", "--interval", "0.2"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        add_version(workspace, tmp_path, rows=41)

        def job_succeeded() -> bool:
            with workspace.store.session() as session:
                states = session.scalars(
                    select(JobRecord.state).where(JobRecord.name.startswith("on-small@"))
                ).all()
            return list(states) == ["SUCCEEDED"]

        wait_until(job_succeeded, 90, "the triggered pipeline's job", 0.2)
    finally:
        server.terminate()
        server.wait(30)
        workspace.close()
    assert server.returncode == 0, (tmp_path / "server.log").read_text()
    reopened = Workspace(Settings(home=tmp_path / "home", user="tester"))
    try:
        (firing,) = list_firings(reopened)
        assert firing.event == "small@v2"
        job = find_job(reopened, firing.job_id or "")
        result = read_result(result_path(job_dir(reopened, job.id), job.attempts))
        assert result is not None
        run = find_run(reopened, result.outputs["pipeline_run"])
        assert run.state == "SUCCEEDED"
    finally:
        reopened.close()
    assert (hello.parent / "loud.txt").read_text() == "NEW"


@pytest.mark.slow
def test_a_fired_pipeline_that_fails_fails_its_job_with_the_runs_sentence(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    failing = write_pipeline(
        tmp_path,
        "name: failing\nsteps:\n  - name: broken\n    kind: command\n"
        '    argv: [PYTHON, -c, "import sys; sys.exit(3)"]\n',
        "failing.yaml",
    )
    add_trigger(pipe_workspace, "every5", failing, cron="*/5 * * * *", now=T0)
    (firing,) = evaluate_triggers(pipe_workspace, T0 + timedelta(minutes=5))
    scheduler = Scheduler(pipe_workspace, LocalExecutor(cpus=[0, 1], gpus=0))

    assert run_to_end(scheduler, firing.job_id or "", timeout=120) == "FAILED"

    job = find_job(pipe_workspace, firing.job_id or "")
    result = read_result(result_path(job_dir(pipe_workspace, job.id), job.attempts))
    assert result is not None and result.outcome == Outcome.FAILED
    assert result.error is not None
    assert result.error.startswith("Pipeline run ") and "Step broken failed." in result.error
