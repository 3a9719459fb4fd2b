"""Run a pipeline: each step, in order, from the cache or as a scheduler job.

A step whose dependencies all succeeded is resolved (`${...}` substituted), keyed
(`cache.py`), and either taken from the cache (its outputs reused, no job submitted) or
run as a job through the scheduler's contract on whatever executor runs jobs here; its
outputs are its job's `JobResult` outputs. Steps that change the world (promote, deploy,
canary) and stream windows, which read what came since the last run (`UNCACHED_KINDS`),
always run. A failed step stops the steps that need it
(SKIPPED), never its siblings. Steps run one at a time.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from forgeml.core.errors import ConfigError, ForgemlError
from forgeml.pipelines import _refs, cache
from forgeml.pipelines.kinds import UNCACHED_KINDS, get_kind
from forgeml.pipelines.runs import (
    StepState,
    find_run,
    finish_run,
    open_run,
    run_summary,
    update_step,
    utcnow,
)
from forgeml.scheduler.contract import JobResult, Outcome

if TYPE_CHECKING:
    from forgeml.core.store import JobRecord
    from forgeml.core.workspace import Workspace
    from forgeml.pipelines.load import Pipeline
    from forgeml.pipelines.steps import StepBase

Output = Callable[[bytes], None]


def _stderr(data: bytes) -> None:
    sys.stderr.buffer.write(data)
    sys.stderr.flush()


@dataclass
class _RunState:
    """What the loop knows so far: each finished step's state and outputs."""

    workspace: Workspace
    pipeline: Pipeline
    run_id: str
    code: cache.CodeVersion
    output: Output
    states: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)


def run_pipeline(
    workspace: Workspace,
    pipeline: Pipeline,
    *,
    output: Output = _stderr,
    code: cache.CodeVersion | None = None,
) -> dict[str, Any]:
    """Run every step of `pipeline` (validated by `load_pipeline`); the run's summary.

    Args:
        workspace: where runs, jobs and the cache are recorded.
        pipeline: the loaded pipeline.
        output: where the steps' job logs go (stderr by default).
        code: the code version for the keys (default: this process's, see `CodeVersion`).

    Returns:
        `run_summary` of the run as it ended (state FAILED when any step did not succeed).
    """
    code = code or cache.CodeVersion.current(pipeline.base)
    run_id = open_run(workspace, pipeline)
    run = _RunState(workspace, pipeline, run_id, code, output)
    try:
        for name in pipeline.order:
            _run_step(run, name)
    except BaseException:
        finish_run(workspace, run_id, "FAILED", "The pipeline run was interrupted.")
        raise
    failed = [name for name in pipeline.order if run.states[name] == StepState.FAILED]
    skipped = [name for name in pipeline.order if run.states[name] == StepState.SKIPPED]
    error = None
    if failed:
        error = f"Step{'s' if len(failed) > 1 else ''} {', '.join(failed)} failed"
        error += f"; {len(skipped)} skipped." if skipped else "."
    finish_run(workspace, run_id, "FAILED" if failed else "SUCCEEDED", error)
    return run_summary(find_run(workspace, run_id))


def _set(run: _RunState, name: str, **fields: Any) -> None:
    with run.workspace.store.session() as session:
        update_step(session, run.run_id, name, **fields)
    if "state" in fields:
        run.states[name] = fields["state"]


def _run_step(run: _RunState, name: str) -> None:
    pipeline = run.pipeline
    unmet = [d for d in pipeline.needs[name] if run.states.get(d) != StepState.SUCCEEDED]
    if unmet:
        error = f"Skipped: step '{unmet[0]}' did not succeed."
        _set(run, name, state=StepState.SKIPPED, error=error)
        return
    started = utcnow()
    try:
        step = _resolve(run, pipeline.step(name))
        parts = key_parts(run, step)
    except ForgemlError as failure:
        _set(run, name, state=StepState.FAILED, error=str(failure), started_at=started)
        return
    key = cache.cache_key(parts)
    with run.workspace.store.session() as session:
        hit = None if step.kind in UNCACHED_KINDS else cache.lookup(session, key)
        if hit is not None and not get_kind(step.kind).outputs(step) <= hit.keys():
            hit = None  # recorded by a forgeml whose kind had fewer outputs
        if hit is not None:
            fields = {"cached": True, "outputs": hit, "cache_key": key}
            fields |= {"started_at": started, "finished_at": utcnow()}
            update_step(session, run.run_id, name, state=StepState.SUCCEEDED, **fields)
    if hit is not None:
        run.states[name], run.outputs[name] = StepState.SUCCEEDED, hit
        return
    _set(run, name, state=StepState.RUNNING, cache_key=key, started_at=started)
    _run_job(run, step, key, parts)


def _resolve(run: _RunState, step: StepBase) -> StepBase:
    """`step` with every `${...}` replaced by its value."""
    fields = _refs.substitute(step.model_dump(mode="json"), run.pipeline.spec.params, run.outputs)
    try:
        return type(step).model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(
            f"Step '{step.name}': key '{key}' after substitution: {first['msg']}."
        ) from None


def key_parts(run: _RunState, step: StepBase) -> cache.KeyParts:
    """What the resolved `step`'s key is made of, with its upstream steps' outputs.

    Raises:
        ForgemlError: an input the step reads is missing.
    """
    needed = {name: run.outputs[name] for name in run.pipeline.needs[step.name]}
    return cache.step_key_parts(run.workspace, step, run.pipeline.base, needed, run.code)


def _job_fields(run: _RunState, step: StepBase) -> dict[str, Any]:
    call = get_kind(step.kind).job(run.workspace, step, run.pipeline.base)
    declared = {k: v for k, v in cache.declared_env(step.env).items() if v is not None}
    fields = {
        "name": f"{run.pipeline.name}.{step.name}",
        "kind": call.job_kind,
        "command": [sys.executable, "-m", call.module, json.dumps(call.spec)],
        "max_retries": step.retries,
        "timeout_seconds": step.timeout,
        "env": declared | call.env,
        "workers": call.workers,
    }
    if call.resources is not None:
        fields["resources"] = call.resources
    return fields


def _run_job(run: _RunState, step: StepBase, key: str, parts: cache.KeyParts) -> None:
    from forgeml.scheduler.submit import job_result, submit_and_run

    workspace = run.workspace
    try:
        fields = _job_fields(run, step)
        job = submit_and_run(workspace, fields, detach=False, wait=True, output=run.output)
    except ForgemlError as failure:
        _set(run, step.name, state=StepState.FAILED, error=str(failure), finished_at=utcnow())
        return
    result = job_result(workspace, job)
    succeeded = (
        job.state == "SUCCEEDED" and result is not None and result.outcome == Outcome.SUCCEEDED
    )
    with workspace.store.session() as session:
        if not succeeded or result is None:
            update_step(
                session,
                run.run_id,
                step.name,
                state=StepState.FAILED,
                job_id=job.id,
                error=_failure(job, result),
                finished_at=utcnow(),
            )
        else:
            record = update_step(
                session,
                run.run_id,
                step.name,
                state=StepState.SUCCEEDED,
                job_id=job.id,
                outputs=result.outputs,
                finished_at=utcnow(),
            )
            if step.kind not in UNCACHED_KINDS:
                cache.remember(session, key, parts, result.outputs, record.id)
    run.states[step.name] = StepState.SUCCEEDED if succeeded else StepState.FAILED
    if succeeded and result is not None:
        run.outputs[step.name] = result.outputs


def _failure(job: JobRecord, result: JobResult | None) -> str:
    """The step's error: its job's own sentence, else how the scheduler saw the job end."""
    if result is not None and result.error:
        return result.error
    if job.error:
        return job.error.splitlines()[0]
    return f"Its job {job.id} ended {job.state}."
