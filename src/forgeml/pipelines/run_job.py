"""`python -m forgeml.pipelines.run_job SPEC_JSON`: one whole pipeline run as a scheduler job.

What a trigger's firing submits (`triggers.py`). The job loads the pipeline file with its
overrides (and, when the file declares a parameter `event`, the event that fired it, e.g.
`alert:ID` or `adult@v7`) and runs it (`run_pipeline`: each step a job of its own, or
from the cache); its `JobResult` (`scheduler/contract.py`) names the pipeline run, and a
failed run fails the job with the run's own sentence.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel, ConfigDict

from forgeml.core.errors import CommandFailedError
from forgeml.scheduler.contract import JobContext, run_job, spec_argument


class PipelineJobSpec(BaseModel):
    """The pipeline to run and, when a trigger fired it, which trigger and event."""

    model_config = ConfigDict(extra="forbid")

    file: str
    overrides: list[str] = []
    trigger: str | None = None
    event: str | None = None


def _stderr(data: bytes) -> None:
    sys.stderr.buffer.write(data)
    sys.stderr.flush()


def run_pipeline_job(spec: PipelineJobSpec) -> dict[str, Any]:
    """Run the pipeline; its run's id and state.

    Raises:
        ConfigError: the pipeline file is no longer valid.
        CommandFailedError: the run did not succeed.
    """
    from forgeml.core.workspace import open_workspace
    from forgeml.pipelines import load_pipeline, run_pipeline

    pipeline = load_pipeline(spec.file, spec.overrides)
    if spec.event is not None and "event" in pipeline.spec.params:  # the file asks for it
        pipeline = load_pipeline(spec.file, [*spec.overrides, f"params.event={spec.event}"])
    if spec.trigger is not None:
        sys.stderr.write(f"trigger {spec.trigger}: event {spec.event}: running {spec.file}\n")
    workspace = open_workspace()
    try:
        summary = run_pipeline(workspace, pipeline, output=_stderr)
    finally:
        workspace.close()
    if summary["state"] != "SUCCEEDED":
        raise CommandFailedError(f"Pipeline run {summary['id']} failed: {summary['error']}")
    return {"pipeline_run": summary["id"], "state": summary["state"]}


def _body(_context: JobContext | None) -> dict[str, Any]:
    return run_pipeline_job(PipelineJobSpec.model_validate(spec_argument()))


if __name__ == "__main__":
    run_job(_body)
