"""`POST /api/v1/runs/{ref}/reproduce`: train again from a run's recorded config, as a job
the server's scheduler runs (`forgeml runs reproduce --detach`): 202 and the queued job."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field

from forgeml.api._authz import require
from forgeml.api._context import acting
from forgeml.api._json import CliRouter

router = CliRouter(prefix="/api/v1/runs")


class Reproduction(BaseModel):
    """What `runs reproduce` takes besides the run: another data version, overrides, queue."""

    model_config = ConfigDict(extra="forbid")

    data: str | None = Field(None, max_length=256, description="Train on this version instead.")
    overrides: list[str] = Field(
        default_factory=list, max_length=100, description="KEY=VALUE of the recorded config."
    )
    queue: str = Field("default", max_length=128, description="The queue to wait in.")


@router.post(
    "/{ref}/reproduce", status_code=202, dependencies=[require("jobs:submit", resource="run")]
)
def reproduce(request: Request, ref: str, body: Reproduction) -> dict[str, Any]:
    """Queue the training job that reproduces run `ref` (a run id, id prefix or name; or a
    model version), owned and audited as the caller: `{"job_id", "state"}`."""
    from forgeml.scheduler.submit import JobOptions
    from forgeml.tracking.jobs import TrainJobSpec, submit_training
    from forgeml.tracking.reproduce import reproduce_config

    home = acting(request)
    config = reproduce_config(home, ref, body.data, body.overrides)
    spec = TrainJobSpec(config=config.model_dump(mode="json"))
    options = JobOptions(detach=True, queue=body.queue)
    job, _ = submit_training(
        home, spec, name=config.name, workers=config.workers, kind="train", options=options
    )
    return {"job_id": job.id, "state": job.state}
