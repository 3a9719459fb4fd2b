from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from forgeml.core.store import PipelineCacheRecord
from forgeml.core.workspace import Workspace
from forgeml.data import catalog
from forgeml.data._frame import SPLIT_COLUMN
from tests.data.conftest import write_table_csv
from tests.pipelines.conftest import row_counts, run, steps_by_name, write_pipeline

# a data step adds a real CSV, two derive from it; a command step reads the split's
# reference; `hello` is a sibling that needs only the ingest
DATA_PIPELINE = """
name: small-data
params:
  seed: 1
steps:
  - name: ingest
    kind: data
    add: small.csv
    dataset: small
    label: label
  - name: clean
    kind: data
    derive: clean
    dataset: ${steps.ingest.dataset}
    params:
      drop: [email]
  - name: split
    kind: data
    derive: split
    dataset: ${steps.clean.dataset}
    params:
      seed: "${params.seed}"
  - name: report
    kind: command
    argv:
      - PYTHON
      - -c
      - "import sys; open('report.txt', 'w').write(sys.argv[1])"
      - ${steps.split.dataset}
    outputs:
      report: report.txt
  - name: hello
    kind: command
    argv: [PYTHON, -c, "open('hello.txt', 'w').write('hi')"]
    needs: [ingest]
    outputs:
      text: hello.txt
"""

FAILING = """
name: failing
steps:
  - name: broken
    kind: command
    argv: [PYTHON, -c, "import sys; sys.exit(3)"]
    outputs: {out: never.txt}
  - name: after-broken
    kind: command
    argv: [PYTHON, -c, "print('${steps.broken.out}')"]
  - name: sibling
    kind: command
    argv: [PYTHON, -c, "open('sibling.txt', 'w').write('ok')"]
    outputs: {out: sibling.txt}
  - name: after-sibling
    kind: command
    argv: [PYTHON, -c, "print(open('${steps.sibling.out}').read())"]
"""


def test_a_data_and_command_pipeline_runs_reruns_fully_cached_and_reruns_what_a_param_changes(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    write_table_csv(tmp_path / "small.csv")
    path = write_pipeline(tmp_path, DATA_PIPELINE)

    first = run(pipe_workspace, path)

    assert first["state"] == "SUCCEEDED", first
    steps = steps_by_name(first)
    assert [s["name"] for s in first["steps"]] == ["ingest", "clean", "split", "report", "hello"]
    assert not any(s["cached"] for s in first["steps"])
    assert all(s["job_id"] for s in first["steps"])
    with pipe_workspace.store.session() as session:
        split = catalog.resolve(session, steps["split"]["outputs"]["dataset"])
        assert "email" not in split.schema and SPLIT_COLUMN in split.schema
        assert split.parent_edges[0].parent.ref == steps["clean"]["outputs"]["dataset"]
    # the command's output came back through its job's result, with its digest
    report = Path(steps["report"]["outputs"]["report"])
    assert report.read_text() == steps["split"]["outputs"]["dataset"]
    assert set(steps["report"]["outputs"]["digests"]) == {"report"}
    jobs_before = row_counts(pipe_workspace)["jobs"]

    second = run(pipe_workspace, path)

    assert second["state"] == "SUCCEEDED"
    assert all(s["cached"] for s in second["steps"])
    assert row_counts(pipe_workspace)["jobs"] == jobs_before  # no job submitted
    assert [s["outputs"] for s in second["steps"]] == [s["outputs"] for s in first["steps"]]
    assert [s["cache_key"] for s in second["steps"]] == [s["cache_key"] for s in first["steps"]]

    # one changed parameter reruns that step and its dependents only
    changed = run(pipe_workspace, path, "params.seed=2")

    cached = {s["name"]: s["cached"] for s in changed["steps"]}
    assert cached == {
        "ingest": True,
        "clean": True,
        "split": False,
        "report": False,
        "hello": True,
    }
    assert row_counts(pipe_workspace)["jobs"] == jobs_before + 2
    # and the changed run is itself cached now
    again = run(pipe_workspace, path, "params.seed=2")
    assert all(s["cached"] for s in again["steps"])


def test_a_cached_output_file_deleted_since_or_missing_from_the_entry_is_a_miss(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    path = write_pipeline(tmp_path, FAILING)
    key = steps_by_name(run(pipe_workspace, path))["sibling"]["cache_key"]
    (tmp_path / "sibling.txt").unlink()

    again = steps_by_name(run(pipe_workspace, path))

    # a cached output file deleted since makes its step run again
    assert not again["sibling"]["cached"] and again["sibling"]["state"] == "SUCCEEDED"
    assert again["sibling"]["cache_key"] == key
    assert (tmp_path / "sibling.txt").read_text() == "ok"
    # its outputs (path and digest) are the same, so what reads it is still cached
    assert again["after-sibling"]["cached"]

    # a cache entry without an output its kind declares is a miss
    with pipe_workspace.store.session() as session:  # as an older kind would have recorded it
        entry = session.get(PipelineCacheRecord, key)
        assert entry is not None
        entry.outputs = {"digests": {}}

    missed = steps_by_name(run(pipe_workspace, path))

    assert not missed["sibling"]["cached"] and missed["sibling"]["state"] == "SUCCEEDED"
    assert missed["after-sibling"]["state"] == "SUCCEEDED"


def test_a_step_with_retries_and_a_timeout_gets_them_on_its_job(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    path = write_pipeline(
        tmp_path,
        """
name: slow
steps:
  - name: sleepy
    kind: command
    argv: [PYTHON, -c, "import threading; threading.Event().wait()"]
    timeout: 1.5
    retries: 0
""",
    )

    summary = run(pipe_workspace, path)

    step = summary["steps"][0]
    assert step["state"] == "FAILED"
    from forgeml.scheduler.jobs import find_job

    job = find_job(pipe_workspace, step["job_id"])
    assert job.spec["timeout_seconds"] == 1.5 and job.spec["max_retries"] == 0
    # the timeout ended it (the program itself never returns): in the step's own words
    # ("its job timed out or was cancelled") when the job had started the program, else in
    # the scheduler's ("timed out after 1.5 s": under load the interpreter may still be
    # importing when the 1.5 s are up)
    assert job.state == "FAILED" and "timed out" in step["error"]


def test_a_missing_read_file_fails_the_step_before_any_job(
    pipe_workspace: Workspace, tmp_path: Path
) -> None:
    path = write_pipeline(
        tmp_path,
        """
name: reads
steps:
  - {name: a, kind: command, argv: [PYTHON, -c, "pass"], reads: [missing.txt]}
  - {name: b, kind: command, argv: [PYTHON, -c, "pass"]}
""",
    )

    steps = steps_by_name(run(pipe_workspace, path))

    assert steps["a"]["state"] == "FAILED"
    assert steps["a"]["error"] == "Step 'a' reads missing.txt, which does not exist."
    assert steps["a"]["job_id"] is None
    assert steps["b"]["state"] == "SUCCEEDED"


def test_a_failed_step_stops_its_dependents_not_its_siblings_and_reruns_on_each_backend(
    any_workspace: Workspace, tmp_path: Path
) -> None:
    """A failure is recorded, never cached, and runs again the next time, while its
    cached sibling does not; on each metadata backend."""
    path = write_pipeline(tmp_path, FAILING)

    summary = run(any_workspace, path)
    again = steps_by_name(run(any_workspace, path))

    steps = steps_by_name(summary)
    assert {name: s["state"] for name, s in steps.items()} == {
        "broken": "FAILED",
        "after-broken": "SKIPPED",
        "sibling": "SUCCEEDED",
        "after-sibling": "SUCCEEDED",
    }
    assert not steps["sibling"]["cached"]
    assert steps["broken"]["error"] == "Step 'broken' exited with code 3."
    assert steps["after-broken"]["error"] == "Skipped: step 'broken' did not succeed."
    assert steps["after-broken"]["job_id"] is None
    assert summary["state"] == "FAILED"
    assert summary["error"] == "Step broken failed; 1 skipped."
    with any_workspace.store.session() as session:
        keys = set(session.scalars(select(PipelineCacheRecord.key)))
    assert steps["broken"]["cache_key"] not in keys  # a failure is never cached
    assert steps["sibling"]["cache_key"] in keys
    # the next run: the failed step runs again, its cached sibling does not
    assert again["broken"]["state"] == "FAILED" and not again["broken"]["cached"]
    assert again["sibling"]["cached"] and again["after-sibling"]["cached"]
    assert again["after-broken"]["state"] == "SKIPPED"
