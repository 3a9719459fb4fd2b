"""The training loop: a plain PyTorch loop that reads top to bottom (cf. nanoGPT's train.py).

`fit` trains a model on `TaskData` as a `TrainConfig` says: AdamW/Adam/SGD with a warm-up
schedule stepped per optimiser step, gradient accumulation, clipping, bf16 autocast,
evaluation and early stopping, atomic checkpoints and exact resume, and DDP when the caller
passes a wrapped model and a `DistContext`. Under `strategy: deepspeed` the model, optimiser
and schedule go into DeepSpeed's engine (ZeRO 1-3, zero.py), which then does backward,
clipping and the step; checkpoints stay forgeml's (with ZeRO's shards beside them).

Data order is a pure function of (seed, epoch): epoch e visits the train rows in the order
torch.randperm(N, generator=manual_seed(seed + e)), in global batches of `batch_size`
(the last incomplete batch is dropped). Each global batch is cut into `grad_accum`
micro-steps and each micro-step into `world_size` equal contiguous shares, one per rank;
every micro-loss is a mean over its share divided by `grad_accum`, so with DDP's gradient
averaging every layout computes the gradient of the mean loss over the global batch.
The pieces of one step (batch plan, micro-batches, loss, clipping, the step's sync) are
plain functions in step.py; this file is the loop around them.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from forgeml.core.errors import ConfigError, ForgemlError, UsageError
from forgeml.train.checkpoint import (
    Checkpoint,
    TrainState,
    checkpoint_due,
    config_digest,
    load_latest,
)
from forgeml.train.config import TrainConfig
from forgeml.train.deepspeed import check_deepspeed_runtime
from forgeml.train.evaluate import evaluate, fairness_groups, scalar_metrics
from forgeml.train.logger import MetricLogger
from forgeml.train.recorder import MetricRecorder, Progress
from forgeml.train.step import (
    BatchPlan,
    DistContext,
    accumulate_gradients,
    epoch_order,
    plan_batches,
    step_statistics,
    unwrap_model,
)
from forgeml.train.stepper import start_stepper
from forgeml.train.task import SplitData, TaskData

if TYPE_CHECKING:
    from forgeml.train.models import Objective


class TrainingDivergedError(ForgemlError):
    """The training loss became NaN or infinite."""


@dataclass
class FitResult:
    """What a finished (or stopped) `fit` reports."""

    steps: int
    epochs_completed: int
    stopped_early: bool  # early stopping ended the run
    final_metrics: dict[str, float]  # eval metrics at the end, and test_* on the test split
    history: list[tuple[int, dict[str, float]]]  # every step's and evaluation's, rank 0 only
    preempted: bool = False  # should_stop() asked to stop; a checkpoint was written
    confusion_matrices: dict[str, list[list[int]]] = field(default_factory=dict)  # eval/test
    # the per-group fairness tables of the final eval/test metrics (binary, with slices)
    fairness: dict[str, Any] = field(default_factory=dict)


def fit(
    model: nn.Module,
    data: TaskData,
    config: TrainConfig,
    *,
    run_dir: Path,
    logger: MetricLogger,
    resume: bool = False,
    teacher: nn.Module | None = None,
    dist: DistContext | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
    objective: Objective | None = None,
) -> FitResult:
    """Train `model` on `data.train` as `config` says, evaluating on `data.eval`.

    Args:
        model: Returns logits from `model(**inputs)`; DDP/FSDP-wrapped when distributed.
        data: The task's splits as tensors.
        config: The validated training config.
        run_dir: The run's folder (checkpoints go to `run_dir/checkpoints/`).
        logger: Receives training metrics every `config.log_every_steps` (rank 0 only).
        resume: Continue from the run's latest checkpoint (a fresh start if it has none).
        teacher: Teacher model for distillation (`config.distill` must be set).
        dist: Rank, world size and device; default: one process on the model's device.
        progress: Called as progress(step, total_steps, metrics) after each step (rank 0).
        should_stop: Polled every step; True writes a checkpoint and returns (preemption).
        clock: Monotonic seconds for `checkpoint.every_minutes` (tests pass a fake one).
        objective: The model family's own loss and evaluation (`ModelFamily.objective`);
            None: the task's (cross-entropy or MSE, and `forgeml.train.evaluate`).

    Returns:
        Steps done, final metrics and the logged history.

    Raises:
        ConfigError: The config does not fit the data (batch size, early stopping, ...).
        UsageError: `run_dir` has checkpoints but `resume` is False.
        TrainingDivergedError: The loss became NaN/inf (the last checkpoint is kept).
        CheckpointError: A checkpoint cannot be written or restored.
    """
    dist = dist or DistContext(device=_device_of(model))
    _check_setup(config, data, teacher, objective, dist)  # refusals come before any work
    if dist.world_size == 1:
        unwrap_model(model).to(dist.device)
    plan = plan_batches(config, len(data.train), dist.world_size)
    # the optimiser and LR schedule; under strategy deepspeed, DeepSpeed's engine of them
    stepper = start_stepper(model, config, dist, plan)
    model = stepper.model
    if resume and dist.world_size > 1:
        # rank 0 may still be writing the checkpoint of a run that just ended in this job
        torch.distributed.barrier()
    state = _start_state(run_dir, config, resume, stepper.restore)
    if teacher is not None:
        teacher.to(dist.device).eval()

    def checkpoint() -> None:
        stepper.save(run_dir, state, config.checkpoint.keep, dist)

    recorder = MetricRecorder(logger, dist.is_main, progress, config.log_every_steps)
    eval_metrics: dict[str, float] = {}
    matrices: dict[str, list[list[int]]] = {}
    tables: dict[str, Any] = {}
    evaluated_step = -1
    checkpointed_step, checkpointed_at = state.step, clock()
    stopped_early = _patience_exhausted(state, config)  # a resumed run that had stopped early
    preempted = False
    order = epoch_order(len(data.train), config.seed, state.epoch)
    model.train()
    while state.step < plan.total_steps and not (stopped_early or preempted):
        started = time.perf_counter()
        loss = accumulate_gradients(
            model, data, order, state.batch_in_epoch, plan, dist, config, teacher, objective
        )
        grad_norm = stepper.clip(config.clip_grad_norm)
        # the step's one host-device sync: loss (for the log and the NaN check) and stop flag
        loss_value, norm_value, preempted = step_statistics(loss, grad_norm, should_stop, dist)
        lr = stepper.lr
        if not math.isfinite(loss_value):
            raise _diverged(state.step + 1, loss_value, lr, checkpointed_step)
        stepper.step()
        # the step is done: move the data position past it (a checkpoint now resumes after it)
        if _advance(state, plan):
            order = epoch_order(len(data.train), config.seed, state.epoch)

        throughput = config.batch_size / (time.perf_counter() - started)
        metrics = _step_metrics(loss_value, norm_value, lr, throughput, state, plan)
        recorder.log_step(metrics, state.step, last=state.step == plan.total_steps)
        recorder.progress(state.step, plan.total_steps, metrics)

        if _eval_due(config, state, data.eval):
            eval_metrics = _evaluate_split(
                stepper.scored, data, "eval", config, dist, matrices, objective, tables
            )
            evaluated_step = state.step
            recorder.log(eval_metrics, state.step, "eval_")
            stopped_early = _update_early_stopping(state, eval_metrics, config)
            model.train()

        if checkpoint_due(config.checkpoint, state.step, clock() - checkpointed_at):
            checkpoint()
            checkpointed_step, checkpointed_at = state.step, clock()

    recorder.flush_steps(state.step)  # early stopping or preemption ended a window early
    if checkpointed_step != state.step:
        checkpoint()
    if not preempted:  # preemption returns at once; the resumed run evaluates
        fresh = eval_metrics if evaluated_step == state.step else None
        eval_metrics = _final_metrics(
            stepper.scored,
            data,
            config,
            dist,
            (matrices, tables),
            fresh,
            recorder,
            state.step,
            objective,
        )
    return FitResult(
        steps=state.step,
        epochs_completed=state.epoch,
        stopped_early=stopped_early,
        final_metrics=eval_metrics,
        history=recorder.history,
        preempted=preempted,
        confusion_matrices=matrices,
        fairness=tables,
    )


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), numpy and Python's `random` with one seed."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def _check_setup(
    config: TrainConfig,
    data: TaskData,
    teacher: nn.Module | None,
    objective: Objective | None,
    dist: DistContext,
) -> None:
    has_eval = data.eval is not None and len(data.eval) > 0
    if config.early_stopping is not None and not has_eval:
        raise ConfigError(
            "early_stopping needs an evaluation split, but the data has none; "
            "set data.eval_split (or data.eval_dataset) or remove early_stopping."
        )
    if (teacher is None) != (config.distill is None):
        raise ConfigError(
            "Distillation needs both a `distill` section in the config and a teacher model; "
            "give both or neither."
        )
    if config.distill is not None and data.task == "regression":
        raise ConfigError(
            "Distillation applies to classification and language models, not regression."
        )
    if objective is not None and (
        config.distill is not None or dist.world_size > 1 or _zero(config)
    ):
        raise own_objective_error(config.model.name)
    if _zero(config):
        check_deepspeed_runtime(cuda=dist.device.type == "cuda")


def _zero(config: TrainConfig) -> bool:
    return config.strategy == "deepspeed"


def own_objective_error(model_name: str) -> ConfigError:
    """Why a family with its own objective cannot train distributed or distilled."""
    # its loss calls the model's own methods, which a DDP wrapper or DeepSpeed's engine
    # does not synchronise
    return ConfigError(
        f"Model '{model_name}' trains with its own objective, which runs in one process "
        "without distillation or DeepSpeed; set workers: 1, strategy: ddp and remove the "
        "distill section."
    )


def _start_state(
    run_dir: Path,
    config: TrainConfig,
    resume: bool,
    restore: Callable[[Checkpoint], None],
) -> TrainState:
    """A fresh, seeded state; or, on resume, everything restored from the last checkpoint."""
    digest = config_digest(config)
    checkpoint = load_latest(run_dir)
    if checkpoint is not None and not resume:
        raise UsageError(
            f"Run folder {run_dir} already has checkpoints (latest: step {checkpoint.state.step}); "
            "resume it (--resume) or train into a new run."
        )
    if checkpoint is None:
        seed_everything(config.seed)
        return TrainState(config_digest=digest)
    if checkpoint.state.config_digest != digest:
        raise ConfigError(
            f"Cannot resume from {checkpoint.path}: the training config differs from the one "
            "that wrote it; resume with the same config or start a new run."
        )
    restore(checkpoint)
    return checkpoint.state


def _diverged(step: int, loss: float, lr: float, checkpointed_step: int) -> TrainingDivergedError:
    kept = f"step {checkpointed_step}" if checkpointed_step else "none written yet"
    return TrainingDivergedError(
        f"Training diverged at step {step}: the loss is {loss}; lower optimizer.lr (now {lr:g}) "
        f"or set clip_grad_norm, then train again (last good checkpoint: {kept})."
    )


def _advance(state: TrainState, plan: BatchPlan) -> bool:
    """Count one step done; True when it finished an epoch."""
    state.step += 1
    state.batch_in_epoch += 1
    if state.batch_in_epoch < plan.steps_per_epoch:
        return False
    state.epoch, state.batch_in_epoch = state.epoch + 1, 0
    return True


def _step_metrics(
    loss: float,
    grad_norm: float | None,
    lr: float,
    throughput: float,
    state: TrainState,
    plan: BatchPlan,
) -> dict[str, float]:
    metrics = {
        "train_loss": loss,
        "lr": lr,
        "samples_per_s": throughput,
        "epoch": state.epoch + state.batch_in_epoch / plan.steps_per_epoch,
    }
    if grad_norm is not None:
        metrics["grad_norm"] = grad_norm  # before clipping
    return metrics


def _eval_due(config: TrainConfig, state: TrainState, split: SplitData | None) -> bool:
    if split is None or len(split) == 0:
        return False
    if config.eval_every_steps is not None:
        return state.step % config.eval_every_steps == 0
    return state.batch_in_epoch == 0  # an epoch just ended


def _evaluate_split(
    model: nn.Module,
    data: TaskData,
    which: str,
    config: TrainConfig,
    dist: DistContext,
    matrices: dict[str, list[list[int]]],
    objective: Objective | None = None,
    tables: dict[str, Any] | None = None,
) -> dict[str, float]:
    """Float metrics of split `which`; its confusion matrix goes to `matrices`, its
    fairness table (if any) to `tables`.

    Every rank evaluates the whole split on the unwrapped model (same weights, same
    numbers), so early-stopping decisions agree without communication.
    """
    split = data.eval if which == "eval" else data.test
    if split is None or len(split) == 0:
        return {}
    if objective is not None:
        return objective.evaluate(model, data, split)
    results = evaluate(
        model,
        split,
        data.task,
        config.batch_size,
        data.class_names,
        device=dist.device,
        precision=config.precision,
    )
    metrics, matrix = scalar_metrics(results)
    if matrix is not None:
        matrices[which] = matrix
    table = fairness_groups(results)
    if table is not None and tables is not None:
        tables["validation" if which == "eval" else which] = table
    return metrics


def _update_early_stopping(
    state: TrainState, metrics: dict[str, float], config: TrainConfig
) -> bool:
    """Record an evaluation; True when patience has run out."""
    stopping = config.early_stopping
    if stopping is None:
        return False
    if stopping.metric not in metrics:
        raise ConfigError(
            f"early_stopping.metric '{stopping.metric}' is not an evaluation metric; "
            f"choose one of {', '.join(sorted(n for n in metrics if '/' not in n))}."
        )
    value = metrics[stopping.metric]
    best = state.best_metric
    if best is None or (value < best if stopping.mode == "min" else value > best):
        state.best_metric, state.bad_evals = value, 0
    else:
        state.bad_evals += 1
    return _patience_exhausted(state, config)


def _patience_exhausted(state: TrainState, config: TrainConfig) -> bool:
    stopping = config.early_stopping
    return stopping is not None and state.bad_evals >= stopping.patience


def _final_metrics(
    model: nn.Module,
    data: TaskData,
    config: TrainConfig,
    dist: DistContext,
    outlets: tuple[dict[str, list[list[int]]], dict[str, Any]],
    fresh_eval: dict[str, float] | None,
    recorder: MetricRecorder,
    step: int,
    objective: Objective | None,
) -> dict[str, float]:
    """Eval metrics of the final weights (reused if just computed) and test_* metrics."""
    matrices, tables = outlets
    final = fresh_eval
    if final is None:
        final = _evaluate_split(model, data, "eval", config, dist, matrices, objective, tables)
        recorder.log(final, step, "eval_")
    test = _evaluate_split(model, data, "test", config, dist, matrices, objective, tables)
    recorder.log(test, step, "test_")
    return {**final, **{f"test_{name}": value for name, value in test.items()}}


def _device_of(model: nn.Module) -> torch.device:
    parameter = next(model.parameters(), None)
    return parameter.device if parameter is not None else torch.device("cpu")
