"""`python -m forgeml.tracking.jobs.tune SPEC_JSON`: a study's entry point."""

from __future__ import annotations

from typing import Any

from forgeml.scheduler.contract import JobContext, run_job, spec_argument
from forgeml.tracking.jobs._specs import TuneJobSpec, tune_job


def _body(_context: JobContext | None) -> dict[str, Any]:
    from forgeml.core.workspace import open_workspace

    spec = TuneJobSpec.model_validate(spec_argument())
    return tune_job(open_workspace(), spec)


if __name__ == "__main__":
    run_job(_body)
