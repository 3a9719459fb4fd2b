"""An optimisation as a scheduler job: `python -m forgeml.optimize.job SPEC_JSON`.

`submit_optimization` records the job and runs it (`forgeml.scheduler.submit`); the new
version, its run and its report come back in the job's result file (`contract.py`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from forgeml.scheduler.contract import JobContext, run_job, spec_argument

if TYPE_CHECKING:
    from forgeml.core.store import JobRecord
    from forgeml.core.workspace import Workspace
    from forgeml.optimize.pipeline import OptimizeRequest
    from forgeml.scheduler.contract import JobResult
    from forgeml.scheduler.submit import JobOptions, Output

OPTIMIZE_MODULE = "forgeml.optimize.job"


class OptimizeJobSpec(BaseModel):
    """The source version and the `OptimizeRequest`'s fields."""

    model_config = ConfigDict(extra="forbid")

    model_ref: str
    request: dict[str, Any]


def optimize_job(workspace: Workspace, spec: OptimizeJobSpec) -> dict[str, Any]:
    """Optimise as `spec` says; the new version, its parent, its run and its report."""
    from forgeml.optimize.pipeline import OptimizeRequest, optimize_model

    result = optimize_model(workspace, spec.model_ref, OptimizeRequest(**spec.request))
    return {
        "model": result.model.ref,
        "parent": result.model.parent,
        "run_id": result.run_id,
        "report": result.report,
    }


def submit_optimization(
    workspace: Workspace,
    model_ref: str,
    request: OptimizeRequest,
    *,
    options: JobOptions | None = None,
    output: Output | None = None,
) -> tuple[JobRecord, JobResult | None]:
    """Run the optimisation as a scheduler job; the job and its result (None while queued).

    Raises:
        ForgemlError: the job failed; the optimisation's own error class and sentence.
    """
    from forgeml.scheduler.submit import run_entry_point

    spec = OptimizeJobSpec(model_ref=model_ref, request=asdict(request))
    return run_entry_point(
        workspace,
        OPTIMIZE_MODULE,
        spec.model_dump(mode="json"),
        kind="optimize",
        name=f"optimize-{model_ref.split('@', maxsplit=1)[0]}",
        options=options,
        output=output,
    )


def _body(_context: JobContext | None) -> dict[str, Any]:
    from forgeml.core.workspace import open_workspace

    return optimize_job(open_workspace(), OptimizeJobSpec.model_validate(spec_argument()))


if __name__ == "__main__":
    run_job(_body)
