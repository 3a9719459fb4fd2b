"""`python -m forgeml.tracking.jobs.train SPEC_JSON`: a training job's entry point."""

from __future__ import annotations

from typing import Any

from forgeml.scheduler.contract import JobContext, run_job, spec_argument
from forgeml.tracking.jobs._specs import TrainJobSpec, train_job


def _body(context: JobContext | None) -> dict[str, Any]:
    from forgeml.core.workspace import open_workspace

    spec = TrainJobSpec.model_validate(spec_argument())
    return train_job(open_workspace(), spec, context)


if __name__ == "__main__":
    run_job(_body)
